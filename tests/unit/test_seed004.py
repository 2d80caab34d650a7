"""Seed 004's words and settings: the wind-down message, the restart marker, the mask notice, the session's
turn count in the recorded pressure state, carryover_turns and max_restarts in every layer (job.toml, the
config file, the launch record a resume keeps), and the state of older runs still loading."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.cli import launch_flags
from console.engine.context.masking import mask_notice
from console.engine.context.pressure import (
    ContextAction,
    ContextManager,
    PressureState,
    restart_marker,
    wind_down_message,
)
from console.engine.guardrails.feedback import FeedbackContext, FeedbackState
from console.engine.job import JobError, JobPaths
from console.engine.job_config import JobConfig, load_job_config
from console.engine.journal import Checkpoint
from console.engine.launch import LAUNCH_VERSION, Launch, changes, read_launch, write_launch
from console.engine.messages import Message, ModelRequest
from console.settings import load_settings, resolve_run_settings
from tests.provenance_support import earlier_run, operator_seal, unsealed

SEED_WIND_DOWN = ("[Context window 80% full. Please wrap up your current task and write any important state to "
                  "workspace files. The session will restart shortly.]")


@pytest.fixture
def config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    path = tmp_path / "config.toml"
    path.write_text("")
    monkeypatch.setenv("AGENT_CONSOLE_CONFIG", str(path))
    return path


# -- the words ------------------------------------------------------------------------------------------------
def test_wind_down_message_is_seed_004s_with_the_windows_share() -> None:
    # 8,000 of a 10,000 window, with 1,250 reserved for the reply: 80% of the window, 94% of the prompt budget.
    cm = ContextManager(10_000, reserve=1_250, used=8_000)
    assert cm.pct > 0.9 and cm.window_pct == 0.8
    evaluation = cm.evaluate([Message.user("x")])
    assert evaluation.action is ContextAction.WIND_DOWN and evaluation.window_pct == 0.8
    text = wind_down_message(evaluation.window_pct)
    assert text.splitlines()[0] == SEED_WIND_DOWN
    assert "94%" not in text


def test_mask_notice_gives_the_windows_share() -> None:
    text = mask_notice(3, 1_200, 0.42)
    assert text.startswith("[Context window 42% full: 3 older tool results (~1200 tokens) were masked.")


def test_restart_marker_names_the_session_and_the_previous_sessions_turns() -> None:
    assert restart_marker(3, 14, 2) == (
        "[Session restarted. Session #3. Previous session context was full. Session #2 ran 14 turns. The last 2 "
        "turns are carried over. Check your workspace files for progress state.]")
    assert "Session #1 ran 1 turn. The last 1 turn is carried over." in restart_marker(2, 1, 1)
    assert "carried" not in restart_marker(2, 5, 0)
    lost = restart_marker(1, None, interrupted=True)
    assert lost == ("[Session restarted. Session #1. The previous session was interrupted and its conversation "
                    "could not be restored. Check your workspace files for progress state.]")


# -- the session's turn count ------------------------------------------------------------------------------
def test_the_context_manager_counts_the_sessions_turns_and_records_them() -> None:
    cm = ContextManager(10_000)
    for _ in range(4):
        cm.record_usage(1_000, 100)
    cm.reset(500)  # a compaction at a phase boundary is not a new session
    assert cm.turns == 4
    again = ContextManager(10_000)
    again.restore(PressureState.model_validate_json(cm.snapshot().model_dump_json()))
    assert again.turns == 4


def test_an_older_runs_checkpoint_without_the_turn_count_still_loads() -> None:
    old = {"v": 3, "session": 2, "turn": 40, "stage": "boundary",
           "context": {"used": 5000, "wind_down_sent": False, "turns_since_wind_down": 0, "masked_total": 3,
                       "trend": [4000, 5000]}}
    cp = Checkpoint.model_validate_json(json.dumps(old))
    assert cp.context is not None and cp.context.turns == 0
    cm = ContextManager(10_000)
    cm.restore(cp.context)
    cm.record_usage(5_000, 10)
    assert cm.turns == 1


@pytest.mark.parametrize("bad", [-1, 10**10, 1.5, "many"])
def test_a_damaged_turn_count_is_refused(bad) -> None:
    with pytest.raises(ValueError):
        PressureState.model_validate_json(json.dumps({"turns": bad}))


# -- carryover_turns and max_restarts: job.toml, the config file, the launch record --------------------------
def test_carryover_turns_from_job_toml_over_the_config_file_over_the_default(config: Path, make_job) -> None:
    assert resolve_run_settings(load_settings(), JobConfig()).carryover_turns == 3
    config.write_text("carryover_turns = 5\n")
    assert resolve_run_settings(load_settings(), JobConfig()).carryover_turns == 5
    job = load_job_config(make_job(files={"job.toml": "[context]\ncarryover_turns = 0\n"}))
    assert resolve_run_settings(load_settings(), job).carryover_turns == 0


def test_carryover_turns_from_the_environment(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config.write_text("carryover_turns = 5\n")
    monkeypatch.setenv("AGENT_CONSOLE_CARRYOVER_TURNS", "2")  # env beats the file, as for every key
    assert load_settings().carryover_turns == 2
    monkeypatch.setenv("AGENT_CONSOLE_CARRYOVER_TURNS", "-4")
    with pytest.raises(JobError, match="carryover_turns"):
        load_settings()


@pytest.mark.parametrize(("toml", "needle"), [
    ("[context]\ncarryover_turns = -1\n", "greater than or equal to 0"),
    ('[context]\ncarryover_turns = "3"\n', "valid integer"),
    ("[context]\ncarryover_turns = 1001\n", "less than or equal to 1000"),
])
def test_carryover_turns_in_job_toml_is_strictly_typed(make_job, toml: str, needle: str) -> None:
    with pytest.raises(JobError) as err:
        load_job_config(make_job(files={"job.toml": toml}))
    assert "context.carryover_turns" in str(err.value) and needle in str(err.value)


def test_carryover_turns_in_the_config_file_is_strictly_typed(config: Path) -> None:
    config.write_text("carryover_turns = 2.5\n")
    with pytest.raises(JobError, match="carryover_turns"):
        load_settings()


def test_a_resume_keeps_the_recorded_carryover_turns_and_max_restarts(config: Path, make_job) -> None:
    paths = make_job(files={"job.toml": "[context]\ncarryover_turns = 1\n[limits]\nmax_restarts = 4\n"})
    rs = resolve_run_settings(load_settings(), load_job_config(paths))
    record = Launch(provider=rs.provider, model=rs.model, max_restarts=rs.max_restarts,
                    carryover_turns=rs.carryover_turns)
    paths.state.mkdir(exist_ok=True)
    write_launch(paths, record, operator_seal())
    # job.toml changes between the start and the resume; the run keeps what it was started with.
    (paths.root / "job.toml").write_text("[context]\ncarryover_turns = 7\n[limits]\nmax_restarts = 9\n")
    recorded = read_launch(paths, operator_seal())
    assert recorded == record
    flags = {k: v for k, v in launch_flags(recorded, {}, False).items() if k not in ("script", "notify")}
    resumed = resolve_run_settings(load_settings(), load_job_config(paths), **flags)
    assert (resumed.carryover_turns, resumed.max_restarts) == (1, 4)
    assert changes(recorded, Launch(provider=rs.provider, model=rs.model, max_restarts=4, carryover_turns=2)) == [
        "carryover_turns: 1 -> 2"]


def test_a_version_1_launch_record_keeps_its_run_alike(tmp_path: Path) -> None:
    """Version 1 counted restarts: its max_restarts N is N + 1 sessions now, read once (never twice)."""
    paths = JobPaths(tmp_path)
    earlier_run(paths.root)  # a version 1 record is a run's from before seals
    old = {"version": 1, "provider": "scripted", "model": "scripted-agent", "max_restarts": 10,
           "auto_restart": True, "context_window": 40_000}
    unsealed(paths, old)
    read = read_launch(paths, operator_seal())
    assert read is not None and read.max_restarts == 11 and read.carryover_turns is None
    assert read.version == LAUNCH_VERSION
    write_launch(paths, read, operator_seal())
    assert read_launch(paths, operator_seal()) == read  # written back as version 2: no second + 1
    # One being made now (no version given) and one of this version are taken as they are.
    assert Launch(provider="p", model="m", max_restarts=10).max_restarts == 10
    assert Launch.model_validate({"version": 2, "provider": "p", "model": "m", "max_restarts": 10}).max_restarts == 10
    # A version 1 record without the key, and one at the top of the range, load.
    assert Launch.model_validate({"version": 1, "provider": "p", "model": "m"}).max_restarts is None
    assert Launch.model_validate({"version": 1, "provider": "p", "model": "m", "max_restarts": 10**6}).max_restarts \
        == 10**6


# -- FeedbackContext: the session and the prompt ------------------------------------------------------------
class _World:
    def file_exists(self, path: str) -> bool:
        return False


def test_feedback_context_builds_the_prompt_only_when_asked_and_once() -> None:
    from datetime import UTC, datetime

    built: list[int] = []
    request = ModelRequest(system="sys", messages=[Message.user("hi")], tools=[])

    def build() -> ModelRequest:
        built.append(1)
        return request

    ctx = FeedbackContext(FeedbackState(), now=datetime(2026, 1, 1, tzinfo=UTC), world=_World(), session=3,
                          prompt=build)
    assert ctx.session == 3 and built == []
    assert ctx.prompt is request and ctx.prompt is request
    assert built == [1]
    bare = FeedbackContext(FeedbackState(), now=datetime(2026, 1, 1, tzinfo=UTC), world=_World())
    assert bare.prompt is None and bare.session == 0
