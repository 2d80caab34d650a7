"""The run settings' table (console.engine.run_setting_specs) and what is built from it or held to it: the settings
flags and their help, their bounds checks, the flags given, the merge of the layers, the typed records (Settings,
job.toml's sections, the launch record, RunSettings), what a resume keeps and how a pod gets each setting.

A setting added to one place and not to the table fails here (or at import: run_setting_check); a launch record
written by the code before the table still resumes the same run."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, Field, create_model

from console.engine import run_setting_specs as table
from console.engine.run_setting_check import check_fields, problems
from console.engine.run_setting_specs import BY_NAME, FLAGGED, SPECS, Bounds

# What the code before the table said, spelled out once more: the table must give the same.
RESUMED_BEFORE = {"provider", "model", "base_url", "context_window", "max_turns", "max_restarts", "auto_restart",
                  "speed", "unconfined", "script", "notify", "carryover_turns", "requires_context", "file_index",
                  "compact_at"}
# A sealed launch record as the code before the table (main at afbb65e) wrote it, every field away from its default.
MAIN_RECORD = (
    '{"version":2,"provider":"openai","model":"gpt-5-mini","base_url":"http://llm.example.internal:8000/v1",'
    '"context_window":64000,"max_turns":42,"max_restarts":4,"auto_restart":false,"carryover_turns":5,'
    '"requires_context":false,"file_index":true,"compact_at":9000,"speed":0.5,"unconfined":true,'
    '"script":"/work/replay.jsonl","notify":["json://localhost:1/hook"],"notify_on_end":false,'
    '"notify_remind":[5.0,30.5],"budgets":{"deadline_seconds":3600,"budget_usd":2.5},'
    '"context_window_source":"settings","started_at":"2026-11-29T21:00:00Z","store":"embedded"}')
MAIN_FLAGS = {"provider": "openai", "model": "gpt-5-mini", "base_url": "http://llm.example.internal:8000/v1",
              "context_window": 64000, "max_turns": 42, "max_restarts": 4, "auto_restart": False, "speed": 0.5,
              "unconfined": True, "script": "/work/replay.jsonl", "notify": ("json://localhost:1/hook",),
              "carryover_turns": 5, "requires_context": False, "file_index": True, "compact_at": 9000}


# --- the table itself ---------------------------------------------------------------------------------------------

def test_the_table_is_consistent() -> None:
    assert len(BY_NAME) == len(SPECS), "a setting twice"
    for spec in SPECS:
        assert spec.help.strip() and spec.type in (int, float, bool, str), spec.name
        if spec.bounds != Bounds():
            assert spec.type in (int, float), f"{spec.name}: bounds on a {spec.type.__name__}"
        if isinstance(spec.default, (int, float)) and not isinstance(spec.default, bool) and spec.bounds != Bounds():
            assert spec.bounds.holds(spec.default), f"{spec.name}: its default is out of its bounds"
        assert not spec.choices or spec.type is str
        assert spec.default in (None, ()) or not spec.choices or spec.default in spec.choices
        if spec.config_key is None:  # a flag of one run only: no config key, no job.toml key, no pod decision
            assert spec.flag is not None and spec.job is None and spec.pod is None, spec.name
        if spec.pod == "flag":
            assert spec.flag is not None and spec.resume != "no", f"{spec.name}: a pod's flag is its launch record's"
        if spec.identity:
            assert spec.resume == "kept"
        if spec.flag is not None and spec.bounds != Bounds():
            assert spec.flag.expected, f"{spec.name}: its check needs what a value must be"
        if spec.flag is not None and spec.flag.off:
            assert spec.type is bool
    assert len({s.dest for s in FLAGGED}) == len(FLAGGED)


def test_what_a_resume_keeps_is_what_it_kept() -> None:
    assert set(table.RESUMED) >= RESUMED_BEFORE
    # A setting a resume keeps from now on is one a record written before lacks: its resume is "added" (the
    # settings of the resume decide, and that is no change).
    assert all(BY_NAME[name].resume == "added" for name in set(table.RESUMED) - RESUMED_BEFORE)
    assert table.IDENTITY == ("provider", "model")
    assert {"carryover_turns", "requires_context", "file_index", "compact_at"} <= set(table.ADDED_LATER)
    assert table.JOB_KEYS["model"] == {"provider": "provider", "name": "model", "base_url": "base_url",
                                       "speed": "speed"}
    assert table.JOB_KEYS["context"]["window"] == "context_window"


@pytest.mark.parametrize(("bounds", "inside", "outside"), [
    (Bounds(0, 10), [0, 10, 5.5], [-0.1, 10.01]),
    (Bounds(0, 1, low_open=True, high_open=True), [0.5, 1e-9], [0, 1]),
    (Bounds(0, None, low_open=True), [1, 1e300], [0, -1]),
])
def test_bounds_hold_as_pydantic_would(bounds: Bounds, inside: list[float], outside: list[float]) -> None:
    model = create_model("M", x=(float, Field(**bounds.pydantic())))  # type: ignore[call-overload]
    for value in inside:
        assert bounds.holds(value)
        model(x=value)
    for value in outside:
        assert not bounds.holds(value)
        with pytest.raises(ValueError):
            model(x=value)


# --- the typed records, held to it --------------------------------------------------------------------------------

def test_the_records_agree_with_the_table() -> None:
    from console.engine.job import ContextSection, LimitsSection, ModelSection
    from console.engine.launch import Launch
    from console.settings import Settings

    assert problems(Settings, {s.name: s.name for s in SPECS if s.config_key == s.name}) == []
    for section in (ModelSection, ContextSection, LimitsSection):
        name = section.__name__.removesuffix("Section").lower()
        assert problems(section, table.JOB_KEYS[name], optional=True) == []
        # and every key of a section is a setting of the table (a key added to job.toml alone fails)
        assert set(section.model_fields) == set(table.JOB_KEYS[name]), name
    assert set(table.RESUMED) <= set(Launch.model_fields)
    # The record's other fields are no setting of the table (one added to the record alone fails here).
    assert set(Launch.model_fields) - set(table.RESUMED) == {
        "version", "notify_on_end", "notify_remind", "budgets", "context_window_source", "started_at", "store"}


def test_a_setting_spelled_otherwise_than_the_table_is_named() -> None:
    """What the import-time check says of a record that disagrees: a missing field, another type, other bounds,
    another default."""
    bad = create_model("Bad", __base__=BaseModel, max_turns=(float, 500), max_restarts=(int, Field(default=10, ge=1)),
                       auto_restart=(bool, False))
    found = problems(bad, {"max_turns": "max_turns", "max_restarts": "max_restarts", "auto_restart": "auto_restart",
                           "speed": "speed"})
    assert any(p.startswith("Bad.max_turns: <class 'float'>") for p in found)
    assert any(p.startswith("Bad.max_turns: bounds") for p in found)
    assert any(p.startswith("Bad.max_restarts: bounds {'ge': 1") for p in found)
    assert "Bad.auto_restart: default False where the table says True" in found
    assert any(p.startswith("Bad.speed: missing") for p in found)
    with pytest.raises(RuntimeError, match=r"run_setting_specs\.py.*disagree.*Bad\.speed: missing"):
        check_fields(bad, ["speed"])


def test_run_settings_has_every_setting_with_the_tables_default() -> None:
    import dataclasses

    from console.engine.run_setting_check import check_record
    from console.engine.run_settings import RunSettings

    fields = {f.name: f.default for f in dataclasses.fields(RunSettings)}
    # What the run has besides the table's settings: job.toml's definition and what is found, not set.
    assert set(fields) - set(BY_NAME) == {"guardrails", "tools", "commands", "prices", "fleet_prices",
                                             "context_window_source"}
    for spec in SPECS:
        if spec.config_key == spec.name:
            assert spec.name in fields
            assert fields[spec.name] in (dataclasses.MISSING, spec.default), spec.name

    @dataclasses.dataclass
    class Short:
        max_turns: int = 7

    with pytest.raises(RuntimeError, match="max_turns: default 7 where the table says 500; speed: missing"):
        check_record(Short, ["max_turns", "speed"])


# --- the command line ---------------------------------------------------------------------------------------------

def _options(parser: argparse.ArgumentParser, command: str) -> dict[str, argparse.Action]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {o: a for a in sub.choices[command]._actions for o in a.option_strings}


@pytest.mark.parametrize("command", ["run", "resume", "submit"])
def test_the_settings_flags_are_the_tables(command: str) -> None:
    from console.cli.parser import build_parser

    options = _options(build_parser(), command)
    for spec in FLAGGED:
        flag = spec.flag
        assert flag is not None
        if flag.run_only and command != "run":
            continue
        if flag.run_only and command == "submit":
            continue
        action = options[flag.option]
        assert action.help == flag.help and action.metavar == flag.metavar, flag.option
        assert action.dest == spec.dest
        if flag.off:
            assert options[flag.off].help == flag.off_help
        if spec.type in (int, float) and not flag.repeat:
            assert action.type is spec.type
    if command != "run":
        assert "--script" not in options
    if command == "resume":  # its own flags, and the table's: a settings flag added to the parser alone fails here
        own = {"-h", "--help", "--console", "--theme", "--wait"}
        assert set(options) - own == {o for s in FLAGGED if s.flag and not s.flag.run_only
                                      for o in (s.flag.option, s.flag.off) if o}


@pytest.mark.parametrize("spec", [s for s in FLAGGED if s.bounds.low is not None], ids=lambda s: s.name)
def test_the_flag_checks_are_the_tables_bounds(spec: Any) -> None:
    from console.cli.common import check_flags

    high = spec.bounds.high
    for good in (spec.default if spec.default is not None else high, high):
        check_flags(argparse.Namespace(**{spec.dest: good}))
    step = 1 if spec.type is int else 0.5
    for bad in (high + step, spec.bounds.low - step if not spec.bounds.low_open else spec.bounds.low, math.inf):
        with pytest.raises(ValueError, match=f"^{spec.flag.option} .*: expected {spec.expected()}$"):
            check_flags(argparse.Namespace(**{spec.dest: bad}))


def test_the_checks_say_what_they_said() -> None:
    assert BY_NAME["max_turns"].expected() == "a whole number from 1 to 10000000"
    assert BY_NAME["speed"].expected() == "a number from 0 to 100"
    assert BY_NAME["context_window"].expected() == "a number of tokens from 1 to 100000000"
    assert BY_NAME["max_restarts"].expected() == "a whole number from 0 to 1000000"


def test_the_flags_given_are_the_tables_resumed_flags(tmp_path: Path) -> None:
    from console.cli.parser import build_parser
    from console.cli.run import explicit_flags

    none = explicit_flags(build_parser().parse_args(["run", "job"]))
    assert set(none) == {s.name for s in FLAGGED if s.resume != "no"} and set(none.values()) == {None}
    args = build_parser().parse_args([
        "run", "job", "--provider", "openai", "--model", "m", "--base-url", "http://h/v1", "--max-turns", "3",
        "--context-window", "9", "--max-restarts", "2", "--no-auto-restart", "--speed", "0", "--notify", "json://a",
        "--notify", "json://b", "--script", "s.jsonl", "--unconfined", "--switch-model"])
    given = explicit_flags(args)
    assert {k: v for k, v in given.items() if v is not None} == {
        "provider": "openai", "model": "m", "base_url": "http://h/v1", "max_turns": 3, "context_window": 9,
        "max_restarts": 2, "auto_restart": False, "speed": 0.0, "notify": ("json://a", "json://b"),
        "script": str(Path("s.jsonl").absolute()), "unconfined": True}
    assert explicit_flags(build_parser().parse_args(["resume", "job", "--auto-restart"]))["auto_restart"] is True


# --- the merge of the layers --------------------------------------------------------------------------------------

def _away(spec: Any) -> Any:
    """A value of the setting other than its default, within its bounds."""
    if spec.choices:
        return next(c for c in spec.choices if c != spec.default)
    if spec.type is bool:
        return not spec.default
    low = spec.bounds.low or 0
    return spec.type(low + 1 if spec.default != low + 1 else low + 2) if spec.type is int else low + 0.25


def test_job_toml_wins_over_the_settings_for_every_key_it_has(make_job: Any) -> None:
    from console.engine.job_config import load_job_config
    from console.settings import CHOSEN_APART, layered_settings, load_settings

    settings = load_settings()
    layered = [s for s in SPECS if s.config_key == s.name and s.name not in CHOSEN_APART]
    paths = make_job()
    assert layered_settings(settings, load_job_config(paths)) == {s.name: getattr(settings, s.name)
                                                                       for s in layered}
    values = {s.name: _away(s) for s in layered if s.job is not None}
    values["soft_threshold"], values["hard_threshold"] = 0.25, 0.5
    sections: dict[str, list[str]] = {}
    for s in layered:
        if s.job is not None:
            sections.setdefault(s.job[0], []).append(f"{s.job[1]} = {json.dumps(values[s.name])}")
    paths.job_toml.write_text("".join(f"[{name}]\n" + "\n".join(lines) + "\n" for name, lines in sections.items()))
    got = layered_settings(settings, load_job_config(paths))
    for s in layered:
        assert got[s.name] == (values[s.name] if s.job is not None else getattr(settings, s.name)), s.name


# --- the launch record and the resume -----------------------------------------------------------------------------

def test_a_record_written_before_the_table_resumes_the_same_run(tmp_path: Path) -> None:
    from console.engine.job import JobPaths
    from console.engine.launch import Launch, changes, read_launch
    from tests.provenance_support import operator_seal, rewrite_record

    paths = JobPaths(tmp_path)
    paths.state.mkdir()
    rewrite_record(paths, json.loads(MAIN_RECORD))
    recorded = read_launch(paths, operator_seal())
    assert recorded is not None
    kept = recorded.flags()
    # Every setting it recorded, as it recorded it; one kept since (none yet) is None: the settings then decide.
    assert {k: v for k, v in kept.items() if k in MAIN_FLAGS} == MAIN_FLAGS
    assert all(kept[k] is None for k in set(kept) - set(MAIN_FLAGS))
    # and written again, the same record (a field added since is written as null)
    again = json.loads(recorded.model_dump_json())
    assert {k: v for k, v in again.items() if k in json.loads(MAIN_RECORD)} == json.loads(MAIN_RECORD)
    if set(again) == set(json.loads(MAIN_RECORD)):
        assert recorded.model_dump_json() == MAIN_RECORD
    assert changes(recorded, Launch.model_validate_json(MAIN_RECORD)) == []


# --- Kubernetes ---------------------------------------------------------------------------------------------------

def test_a_pod_gets_each_run_setting_as_the_table_says() -> None:
    from console.kube import carry

    for spec in SPECS:
        if spec.pod is not None:
            assert spec.config_key is not None
            how, why = carry.SETTINGS[spec.config_key]
            assert how == spec.pod and why.startswith(spec.flag.option if how == "flag" and spec.flag else
                                                      spec.env or "")
    assert carry.SETTINGS["auto_restart"] == ("flag", "--auto-restart / --no-auto-restart")
    assert carry.SETTINGS["soft_threshold"] == ("variable", "AGENT_CONSOLE_SOFT_THRESHOLD")


def test_the_pods_run_flags_carry_every_flag_the_table_gives_a_pod() -> None:
    import dataclasses

    from console.engine.run_settings import RunSettings
    from console.kube.carry import recorded_settings, run_flags
    from console.settings import load_settings

    rs = RunSettings(provider="scripted", model="m", base_url="http://h/v1", speed=0.0, context_window=9,
                     context_window_source="settings", soft_threshold=0.5, hard_threshold=0.6, max_turns=3,
                     max_restarts=2, auto_restart=False)
    flags = run_flags(rs, unconfined=False)
    for spec in SPECS:
        if spec.pod == "flag" and spec.flag is not None:
            assert spec.flag.option in flags or spec.flag.off in flags, spec.name
    assert "--auto-restart" in run_flags(dataclasses.replace(rs, auto_restart=True), unconfined=False)
    # The Job's annotation records what a resume keeps (a pod never replays a --script: submit takes none).
    recorded = recorded_settings(rs, load_settings(), {}, None, (), False)
    assert set(table.RESUMED) - {"script"} <= set(recorded)


def test_the_record_keeps_the_runs_settings_as_it_did() -> None:
    """`run` and submit's annotation take the kept settings from the run's resolved settings by the table: the same
    fields the record was given one by one before."""
    from console.engine.launch import kept_settings
    from console.engine.run_settings import RunSettings

    rs = RunSettings(provider="openai", model="m", base_url="http://h/v1", speed=0.5, context_window=9,
                     soft_threshold=0.5, hard_threshold=0.6, max_turns=3, max_restarts=2, auto_restart=False,
                     carryover_turns=5, requires_context=False, file_index=True, compact_at=7)
    before = {"provider": rs.provider, "model": rs.model, "base_url": rs.base_url, "context_window": rs.context_window,
              "max_turns": rs.max_turns, "max_restarts": rs.max_restarts, "auto_restart": rs.auto_restart,
              "carryover_turns": rs.carryover_turns, "requires_context": rs.requires_context,
              "file_index": rs.file_index, "compact_at": rs.compact_at, "speed": rs.speed}
    kept = kept_settings(rs)
    assert {k: v for k, v in kept.items() if k in before} == before
    assert set(kept) == {s.name for s in SPECS if s.resume != "no" and s.config_key == s.name}
