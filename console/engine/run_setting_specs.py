"""The run settings as every surface spells them: one spec table, from which the command line's settings flags,
their help and their bounds checks, job.toml's [model], [context] and [limits] keys, the config file's fields
(their types' bounds and defaults), what a resume keeps from the launch record, and how a pod on Kubernetes gets
each setting are built or checked (console.engine.run_setting_check, at import; tests/unit/test_run_setting_specs.py
and the docs' tests against README and docs/).

Per setting: its type, bounds and default, its job.toml key ([section] name), its config key and environment
variable, its flag (and the flag's help), whether a resume keeps it from the launch record, how a pod gets it, and
a line saying what it is. Plain data: the command line reads it at every start, before it knows whether it needs
pydantic. The rows are in the order of the command line's help (the settings flags, then the rest).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Bounds of the numbers an operator may set (job.toml, the config file, env vars, flags): beyond them a value is a
# typo, and some (a sleep of 1e300 s, a window of 10**30 tokens) would fail deep in a run.
MAX_CONTEXT_WINDOW = 10**8
MAX_TURNS = 10**7
MAX_RESTARTS = 10**6
MAX_CARRYOVER_TURNS = 1000
# In-place compaction (console.engine.context.pressure): the default threshold and the most one may set, in tokens.
DEFAULT_COMPACT_AT = 3_000
MAX_COMPACT_AT = 10_000_000  # beyond any window
# How many whole turns a restart carries into the next session by default (seed 004's carryover_turns).
DEFAULT_CARRYOVER_TURNS = 3
MAX_SPEED = 100.0
MAX_MEGABYTES = float(1 << 20)  # 1 TiB, for max_write_mb and max_job_mb
DAY = 24 * 3600
ENV_PREFIX = "AGENT_CONSOLE_"

# How a pod gets a setting (console.kube.carry): a flag of its `run` (kept by its launch record), an AGENT_CONSOLE_*
# variable of the pod, or one read from the run's Secret.
Pod = Literal["flag", "variable", "secret"]
# What a resume does with it: "no" (the settings of the resume decide), "kept" (the launch record's value, unless a
# flag given to the resume says otherwise), "added" (kept, but a record written before it was recorded lacks it:
# the settings of the resume then decide, and that is no change).
Resume = Literal["no", "kept", "added"]


@dataclass(frozen=True)
class Bounds:
    """The range of a number: ``low`` and ``high`` included, or excluded where ``*_open`` (pydantic's gt, lt)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False

    def pydantic(self) -> dict[str, float]:
        """As pydantic's Field takes them (ge/gt, le/lt)."""
        out: dict[str, float] = {}
        if self.low is not None:
            out["gt" if self.low_open else "ge"] = self.low
        if self.high is not None:
            out["lt" if self.high_open else "le"] = self.high
        return out

    def holds(self, value: float) -> bool:
        low_ok = self.low is None or (value > self.low if self.low_open else value >= self.low)
        high_ok = self.high is None or (value < self.high if self.high_open else value <= self.high)
        return low_ok and high_ok


@dataclass(frozen=True)
class Flag:
    """The setting's flag, as run, resume and submit take it (``run_only``: run alone)."""

    option: str
    help: str
    metavar: str | None = None
    # What the flag's check says a value must be, before its range: "a whole number" (from 0 to 1000000).
    expected: str = ""
    # A bool setting's flag that turns it off ("--no-auto-restart"): listed first, the two exclusive.
    off: str | None = None
    off_help: str = ""
    repeat: bool = False  # given again, it adds a value (argparse's append)
    path: bool = False  # a file's path, recorded absolute (a resume may start from another folder)
    run_only: bool = False


@dataclass(frozen=True)
class RunSettingSpec:
    name: str  # the field of console.settings.Settings, RunSettings and the launch record
    type: type  # int, float, bool, str (a str with choices: a Literal of them)
    help: str  # what it is, in a line (the flag's help is the flag's)
    default: object = None  # None: none here (the provider's model, the model's window...)
    bounds: Bounds = Bounds()
    choices: tuple[str, ...] = ()
    job: tuple[str, str] | None = None  # job.toml's [section] and key
    # The config file's key (a table's as "table.key"); its variable is AGENT_CONSOLE_ and it in capitals. None:
    # no setting of the config file (a flag of one run only).
    config: str | None = ""
    flag: Flag | None = None
    resume: Resume = "no"
    identity: bool = False  # changed at a resume only with --switch-model (another model's run)
    pod: Pod | None = None  # None: not a config setting, or one carry.py decides (data_dir, keys...)
    pod_note: str = ""  # what the pod's decision says beyond the flag or the variable

    @property
    def config_key(self) -> str | None:
        return self.name if self.config == "" else self.config

    @property
    def env(self) -> str | None:
        key = self.config_key
        return None if key is None else ENV_PREFIX + key.replace(".", "_").upper()

    @property
    def dest(self) -> str:
        """The flag's attribute on argparse's namespace."""
        assert self.flag is not None
        return self.flag.option.removeprefix("--").replace("-", "_")

    @property
    def pod_how(self) -> str:
        """The pod's decision as console.kube.carry words it: the flag or the variable first."""
        first = self.flag.option if self.pod == "flag" and self.flag is not None else self.env or ""
        if self.pod == "flag" and self.flag is not None and self.flag.off:
            first = f"{self.flag.option} / {self.flag.off}"
        return f"{first} {self.pod_note}".strip()

    def expected(self) -> str:
        """``a whole number from 0 to 1000000``: what the flag's check says a value must be."""
        assert self.flag is not None and self.bounds.low is not None and self.bounds.high is not None
        low = self.bounds.low + 1 if self.bounds.low_open and self.type is int else self.bounds.low
        def shown(v: float) -> str:
            return str(int(v)) if self.type is int else f"{v:g}"

        return f"{self.flag.expected} from {shown(low)} to {shown(self.bounds.high)}"


S = RunSettingSpec
SPECS: tuple[RunSettingSpec, ...] = (
    S("provider", str, "model provider (its default model follows)", default="scripted", job=("model", "provider"),
      flag=Flag("--provider", "model provider (its default model follows)"), resume="kept", identity=True,
      pod="flag"),
    S("model", str, "model name (default depends on the provider)", job=("model", "name"),
      flag=Flag("--model", "model name (default depends on the provider)"), resume="kept", identity=True,
      pod="flag"),
    S("base_url", str, "API base URL (an OpenAI-compatible server such as llama.cpp, vLLM, Ollama)",
      job=("model", "base_url"),
      flag=Flag("--base-url", "API base URL (an OpenAI-compatible server such as llama.cpp, vLLM, Ollama)"),
      resume="kept", pod="flag", pod_note="(also when it came from $OPENAI_BASE_URL...; never with a password)"),
    S("switch_model", bool, "let a resume change the run's provider or model (refused without it)", default=False,
      config=None, flag=Flag("--switch-model", "let a resume change the run's provider or model (refused without it)")),
    S("max_turns", int, "turns of a session before the run ends (incomplete)", default=500,
      bounds=Bounds(0, MAX_TURNS, low_open=True), job=("limits", "max_turns"),
      flag=Flag("--max-turns", "stop a session after N turns", "N", "a whole number"), resume="kept", pod="flag"),
    S("context_window", int, "the window the context budget is computed from (None: the model's)",
      bounds=Bounds(0, MAX_CONTEXT_WINDOW, low_open=True), job=("context", "window"),
      flag=Flag("--context-window", "override the model's context window", "TOKENS", "a number of tokens"),
      resume="kept", pod="flag", pod_note="when the settings chose it (the registry's and [prices]' are the pod's "
                                          "own, from the same tables)"),
    S("max_restarts", int, "the most sessions a run may have (seed 004: N allows N-1 restarts)", default=10,
      bounds=Bounds(0, MAX_RESTARTS), job=("limits", "max_restarts"),
      flag=Flag("--max-restarts", "the most sessions a run may have (seed 004): a full context in session N ends "
                "the run (failed) instead of restarting, so N allows N-1 restarts (default 10)", "N",
                "a whole number"),
      resume="kept", pod="flag"),
    S("auto_restart", bool, "restart on a full context without asking", default=True, job=("limits", "auto_restart"),
      flag=Flag("--auto-restart", "restart on a full context without asking", off="--no-auto-restart",
                off_help="when the context is full, wait for `agent-console approve RUN` before restarting"),
      resume="kept", pod="flag"),
    S("speed", float, "the scripted demo model's pace: higher is faster, 0 instant", default=1.0,
      bounds=Bounds(0, MAX_SPEED), job=("model", "speed"),
      flag=Flag("--speed", "scripted demo model pacing, higher is faster: 1 looks alive (default), 2 twice as fast, "
                "0 instant", "X", "a number"),
      resume="kept", pod="flag"),
    S("notify", str, "Apprise URLs told when a run needs its operator", default=(), config="notify.urls",
      flag=Flag("--notify", "tell this Apprise URL when the run needs you (ntfy://, slack://, json://, mailto://...; "
                "repeatable; default: the config's [notify] urls)", "URL", repeat=True),
      resume="kept", pod="secret", pod_note="(the URLs carry tokens)"),
    S("script", str, "a replay script of exact turns for the scripted provider", config=None,
      flag=Flag("--script", "replay exact turns from FILE (JSON list or JSON Lines) with the scripted provider",
                "FILE", path=True, run_only=True),
      resume="kept"),
    S("unconfined", bool, "the job's [[tools]] commands run without a sandbox", default=False, config=None,
      flag=Flag("--unconfined", "run the job's [[tools]] commands WITHOUT a sandbox for this run (they see everything "
                "you can and reach the network; still bounded in time, processes, memory and folder size)",
                run_only=True),
      resume="kept"),
    S("soft_threshold", float, "share of the window where observation masking starts", default=0.70,
      bounds=Bounds(0, 1, low_open=True, high_open=True), job=("context", "soft_threshold"), pod="variable"),
    S("hard_threshold", float, "share of the window where the agent is asked to wind down", default=0.85,
      bounds=Bounds(0, 1, low_open=True, high_open=True), job=("context", "hard_threshold"), pod="variable"),
    S("carryover_turns", int, "whole turns a context restart carries into the next session (seed 004)",
      default=DEFAULT_CARRYOVER_TURNS, bounds=Bounds(0, MAX_CARRYOVER_TURNS), job=("context", "carryover_turns"),
      resume="added", pod="variable"),
    S("requires_context", bool, "working memory (the last tasks, active blockers) in every prompt (seed 003)",
      default=True, job=("context", "requires_context"), resume="added", pod="variable"),
    S("file_index", bool, "the job's file catalogue and the agent's find_files tool (seed 003 phase 2)",
      default=False, job=("context", "file_index"), resume="added", pod="variable"),
    S("compact_at", int, "tokens masking cannot free at which a session compacts in place (0: never in place)",
      default=DEFAULT_COMPACT_AT, bounds=Bounds(0, MAX_COMPACT_AT), job=("context", "compact_at"), resume="added",
      pod="variable"),
    S("max_write_mb", float, "the most one tool call may write (MB)", default=4.0,
      bounds=Bounds(0, MAX_MEGABYTES, low_open=True), job=("limits", "max_write_mb"), pod="variable"),
    S("max_job_mb", float, "the most the job folder may hold (MB)", default=1024.0,
      bounds=Bounds(0, MAX_MEGABYTES, low_open=True), job=("limits", "max_job_mb"), pod="variable"),
    S("summary", str, "how phase boundaries are summarised: facts only, or also by the model",
      default="deterministic", choices=("deterministic", "llm"), job=("context", "summary"), pod="variable"),
    S("retry_total_wait", float, "seconds a turn's transient failures are retried before the run asks",
      default=600.0, bounds=Bounds(0, 7 * DAY), pod="variable"),
    S("unreachable_wait", float, "seconds an unreachable server is retried before the run asks", default=30.0,
      bounds=Bounds(0, DAY), pod="variable"),
    S("retry_after_cap", float, "the most seconds a server's retry-after is honoured", default=300.0,
      bounds=Bounds(0, DAY), pod="variable"),
    S("idle_timeout", float, "seconds of a stream with no model output before it is a failure", default=120.0,
      bounds=Bounds(0, DAY, low_open=True), pod="variable"),
    S("turn_timeout", float, "seconds a whole reply may take before it is a failure", default=1800.0,
      bounds=Bounds(0, 7 * DAY, low_open=True), pod="variable"),
)
del S
BY_NAME: dict[str, RunSettingSpec] = {s.name: s for s in SPECS}
FLAGGED: tuple[RunSettingSpec, ...] = tuple(s for s in SPECS if s.flag is not None)
# What a resume takes from the launch record when no flag says otherwise (the record's field = the setting's name).
RESUMED: tuple[str, ...] = tuple(s.name for s in SPECS if s.resume != "no")
# Settings a record from an older version may lack (None): the run then took the settings' value, which is written
# down at the resume, not changed by it.
ADDED_LATER: tuple[str, ...] = tuple(s.name for s in SPECS if s.resume == "added")
# Changing these makes it another model's run: only with --switch-model.
IDENTITY: tuple[str, ...] = tuple(s.name for s in SPECS if s.identity)
# The settings job.toml sets, by its [section] (model, context, limits): {section: {key: setting}}.
JOB_KEYS: dict[str, dict[str, str]] = {}
for _s in SPECS:
    if _s.job is not None:
        JOB_KEYS.setdefault(_s.job[0], {})[_s.job[1]] = _s.name
del _s
