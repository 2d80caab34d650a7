"""Tool policies (seed 002, "Tool Policies"): hard gates in front of every tool call.

A policy declares that a tool B needs a tool A first, unconditionally (:class:`SequentialDependencyPolicy`)
or keyed by a parameter (:class:`ReadBeforeWritePolicy`). Policies are composable (every policy that
governs a tool must allow it) and fail-closed (a policy that raises denies). Their state is the list of
calls that *succeeded*; it lives outside the policy, in a :class:`PolicyState` the gate owns, so the run can
record, snapshot and restore it with the rest of its state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_serializer

# Defined with job.toml's checks (which use them without loading the policies), offered here too.
from console.engine.guardrails.bounds import FILE_CHANGING_TOOLS as FILE_CHANGING_TOOLS
from console.engine.guardrails.bounds import find_cycle as find_cycle
from console.engine.guardrails.bounds import ordered
from console.engine.job_files import one_line

# A hostile or looping agent can read a million distinct paths: the recorded keys are capped. Past the cap
# further keys are simply not recorded. That can only cause more denials (a write of a file read after the
# cap is denied as "not read"), never fewer: the cap fails closed.
MAX_POLICY_KEYS = 10_000
# Tool names come from the registry and job.toml, so this is never reached in practice; it bounds a state
# file read back from disk.
MAX_POLICY_TOOLS = 1_000


@dataclass(frozen=True)
class PolicyDecision:
    allowed: bool
    reason: str | None = None

    @classmethod
    def allow(cls) -> PolicyDecision:
        return cls(True, None)

    @classmethod
    def deny(cls, reason: str) -> PolicyDecision:
        return cls(False, reason)


class World(Protocol):
    """What a guardrail may ask of the job folder: two questions, no effects.

    The loop implements it over the sandbox, so a guardrail sees exactly what the tools would see."""

    def file_exists(self, path: str) -> bool:
        """``path`` as the agent gave it, relative to the job root; False if missing or refused."""
        ...

    def normalize(self, path: str) -> str | None:
        """The canonical relative POSIX path (``./a//b.txt`` -> ``a/b.txt``); None if the path is refused."""
        ...


class PolicyState(BaseModel):
    """The seed's session slice for one policy: which tools, and which (tool, key) pairs, succeeded.

    Immutable: policies return a new state from ``on_result``; the gate swaps it in. Serialized as sorted
    lists so the JSON is deterministic (a checkpoint diff shows real changes only)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy_name: str = Field(max_length=200)
    invoked_tools: frozenset[str] = Field(default=frozenset(), max_length=MAX_POLICY_TOOLS)
    invoked_keys: frozenset[tuple[str, str]] = Field(default=frozenset(), max_length=MAX_POLICY_KEYS)

    @field_serializer("invoked_tools")
    def _tools_sorted(self, tools: frozenset[str]) -> list[str]:
        return sorted(tools)

    @field_serializer("invoked_keys")
    def _keys_sorted(self, keys: frozenset[tuple[str, str]]) -> list[list[str]]:
        return [list(k) for k in sorted(keys)]

    def with_tool(self, tool: str) -> PolicyState:
        if tool in self.invoked_tools or len(self.invoked_tools) >= MAX_POLICY_TOOLS:
            return self
        return self.model_copy(update={"invoked_tools": self.invoked_tools | {tool}})

    def with_key(self, tool: str, key: str) -> PolicyState:
        pair = (tool, key)
        if pair in self.invoked_keys or len(self.invoked_keys) >= MAX_POLICY_KEYS:
            return self  # at the cap: not recorded (fail-closed, see MAX_POLICY_KEYS)
        return self.model_copy(update={"invoked_keys": self.invoked_keys | {pair}})


@dataclass
class PolicyContext:
    state: PolicyState
    world: World


@runtime_checkable
class ToolPolicy(Protocol):
    name: str

    def governs(self, tool: str) -> bool:
        """True if the policy checks ``tool`` or records it (the gate skips the policy otherwise)."""
        ...

    def check(self, tool: str, params: Mapping[str, Any], *, context: PolicyContext) -> PolicyDecision: ...

    def on_result(self, tool: str, params: Mapping[str, Any], ok: bool, *, context: PolicyContext) -> PolicyState:
        """The new state after ``tool`` ran; policies record only successful calls (``ok``)."""
        ...


def _and_list(items: Sequence[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


class SequentialDependencyPolicy:
    """Tool B requires each of its tools A to have succeeded before (seed: ``deploy <- test, build``)."""

    kind = "sequential"

    def __init__(self, dependencies: Mapping[str, Iterable[str]], name: str = "sequential") -> None:
        self.name = name
        self.dependencies: dict[str, tuple[str, ...]] = {t: ordered(reqs) for t, reqs in dependencies.items()}
        for tool, reqs in self.dependencies.items():
            if tool in reqs:
                raise ValueError(f"{name}: a tool cannot depend on itself ({tool!r})")
        cycle = find_cycle(self.dependencies)
        if cycle:
            raise ValueError(f"{name}: dependency cycle: {' -> '.join(cycle)}")
        self._prerequisites = frozenset(t for reqs in self.dependencies.values() for t in reqs)

    def governs(self, tool: str) -> bool:
        # A prerequisite is governed too: the gate must call on_result for it so its success is recorded.
        return tool in self.dependencies or tool in self._prerequisites

    def check(self, tool: str, params: Mapping[str, Any], *, context: PolicyContext) -> PolicyDecision:
        required = self.dependencies.get(tool)
        if not required:
            return PolicyDecision.allow()
        missing = [t for t in required if t not in context.state.invoked_tools]
        if not missing:
            return PolicyDecision.allow()
        return PolicyDecision.deny(
            f"{tool} requires {_and_list(list(required))} to succeed first (not yet: {', '.join(missing)})")

    def on_result(self, tool: str, params: Mapping[str, Any], ok: bool, *, context: PolicyContext) -> PolicyState:
        return context.state.with_tool(tool) if ok and self.governs(tool) else context.state

    def describe(self) -> str:
        return "; ".join(f"{tool} <- {', '.join(reqs)}" for tool, reqs in self.dependencies.items())


class ReadBeforeWritePolicy:
    """An existing file must be read before a tool changes it (writes, appends to or edits it); new files are
    free (seed 002).

    Keys are normalized paths, so ``./a//b.txt`` and ``a/b.txt`` are one file. Decisions:

    - a write whose path the world refuses (``normalize`` is None) is *allowed*: the tool refuses it itself,
      with a message about the path, which helps the agent more than "read it first" would;
    - a write without a usable path argument is denied (the policy cannot tell what it would overwrite);
    - a successful write records the path too. The seed is silent here; recording is right because the agent
      wrote the content, so it knows it, and without it ``write_file(new.txt)`` then ``edit_file(new.txt)``
      would demand a pointless read of a file the agent just wrote.
    """

    kind = "read_before_write"

    def __init__(self, name: str = "read_before_write", read_tools: Sequence[str] = ("read_file",),
                 write_tools: Sequence[str] = FILE_CHANGING_TOOLS, path_param: str = "path",
                 tool_params: Mapping[str, str] | None = None) -> None:
        self.name = name
        self.read_tools = tuple(read_tools)
        self.write_tools = tuple(write_tools)
        self.path_param = path_param
        # The argument naming the file, for a tool whose is not ``path_param`` (from the tool registry).
        self.tool_params = dict(tool_params or {})
        self._knowing_tools = (*self.read_tools, *self.write_tools)

    def governs(self, tool: str) -> bool:
        return tool in self.read_tools or tool in self.write_tools

    def _param(self, tool: str) -> str:
        return self.tool_params.get(tool, self.path_param)

    def _path(self, tool: str, params: Any) -> str | None:
        value = params.get(self._param(tool)) if isinstance(params, Mapping) else None
        return value if isinstance(value, str) and value else None

    def check(self, tool: str, params: Mapping[str, Any], *, context: PolicyContext) -> PolicyDecision:
        if tool not in self.write_tools:
            return PolicyDecision.allow()  # reading is always allowed: it is what this policy asks for
        path = self._path(tool, params)
        if path is None:
            return PolicyDecision.deny(
                f"{tool} needs a '{self._param(tool)}' string argument: the read-before-write policy cannot tell "
                "which file it would write")
        key = context.world.normalize(path)
        if key is None:
            return PolicyDecision.allow()  # refused path: the tool's own error is the better message
        if not context.world.file_exists(path):
            return PolicyDecision.allow()  # a new file
        keys = context.state.invoked_keys
        if any((t, key) in keys for t in self._knowing_tools):
            return PolicyDecision.allow()
        shown = one_line(key, 120)
        return PolicyDecision.deny(
            f"{shown} already exists and has not been read: call {self.read_tools[0]}('{shown}') first, "
            f"then {tool} it")

    def on_result(self, tool: str, params: Mapping[str, Any], ok: bool, *, context: PolicyContext) -> PolicyState:
        if not ok or not self.governs(tool):
            return context.state
        path = self._path(tool, params)
        key = context.world.normalize(path) if path is not None else None
        return context.state.with_key(tool, key) if key is not None else context.state

    def describe(self) -> str:
        return (f"{', '.join(self.write_tools)} of an existing file need a prior "
                f"{' or '.join(self.read_tools)} of it")


# -- the gate ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class GateVerdict:
    """The gate's answer for one call. ``policy`` names the denying policy; ``error`` is set when it raised.

    ``consulted_world`` says the decision depended on the job folder (a file existed or not): the loop
    journals such a decision before the side effect, since replaying it later could answer differently."""

    allowed: bool
    policy: str | None = None
    reason: str = ""
    error: str | None = None
    consulted_world: bool = False


class _ObservedWorld:
    """A World that remembers whether anyone asked it something."""

    __slots__ = ("_world", "consulted")

    def __init__(self, world: World) -> None:
        self._world = world
        self.consulted = False

    def file_exists(self, path: str) -> bool:
        self.consulted = True
        return self._world.file_exists(path)

    def normalize(self, path: str) -> str | None:
        self.consulted = True
        return self._world.normalize(path)


def _error_text(exc: BaseException) -> str:
    return one_line(repr(exc), 300)


class PolicyGate:
    """All policies in front of the tools: every policy that governs a tool must allow it (seed: composable).

    Fail-closed: a policy whose ``governs`` or ``check`` raises, or that answers something other than a
    PolicyDecision, denies the call. A policy whose ``on_result`` raises keeps its previous state (the call
    already ran; the error is returned so the loop can report it). Denials stop at the first denying policy,
    in declared order, so the later policies never touch the world for a call that will not run."""

    def __init__(self, policies: Sequence[ToolPolicy]) -> None:
        names = [p.name for p in policies]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"policy names must be unique; duplicated: {', '.join(dupes)}")
        self.policies: tuple[ToolPolicy, ...] = tuple(policies)
        self._states: dict[str, PolicyState] = {}
        self.reset()

    def reset(self) -> None:
        """Forget every recorded call (the seed's ``session.reset()``)."""
        self._states = {p.name: PolicyState(policy_name=p.name) for p in self.policies}

    def check(self, tool: str, params: Mapping[str, Any], world: World) -> GateVerdict:
        observed = _ObservedWorld(world)
        for policy in self.policies:
            try:
                if not policy.governs(tool):
                    continue
                decision = policy.check(tool, params, context=PolicyContext(self._states[policy.name], observed))
                if not isinstance(decision, PolicyDecision):
                    raise TypeError(f"check() returned {type(decision).__name__}, not a PolicyDecision")
            except Exception as exc:
                return GateVerdict(False, policy.name,
                                   f"the {policy.name} policy failed while checking {tool}; the call is "
                                   "denied (fail-closed)",
                                   _error_text(exc), observed.consulted)
            if not decision.allowed:
                reason = decision.reason or f"denied by the {policy.name} policy"
                return GateVerdict(False, policy.name, reason, None, observed.consulted)
        return GateVerdict(True, None, "", None, observed.consulted)

    def on_result(self, tool: str, params: Mapping[str, Any], ok: bool, world: World) -> list[str]:
        errors: list[str] = []
        for policy in self.policies:
            try:
                if not policy.governs(tool):
                    continue
                state = policy.on_result(tool, params, ok, context=PolicyContext(self._states[policy.name], world))
                if not isinstance(state, PolicyState):
                    raise TypeError(f"on_result() returned {type(state).__name__}, not a PolicyState")
            except Exception as exc:
                errors.append(f"{policy.name}: {_error_text(exc)}")
                continue
            if state.policy_name != policy.name:
                state = state.model_copy(update={"policy_name": policy.name})
            self._states[policy.name] = state
        return errors

    def snapshot(self) -> dict[str, PolicyState]:
        return dict(self._states)  # the states are immutable: a shallow copy is a snapshot

    def restore(self, states: Mapping[str, PolicyState]) -> None:
        """Take the recorded state of each configured policy; a policy not in ``states`` starts empty and a
        state whose policy is no longer configured (job.toml changed between runs) is dropped."""
        self.reset()
        for name in self._states:
            state = states.get(name)
            if state is not None:
                self._states[name] = state.model_copy(update={"policy_name": name})

    def describe(self) -> list[tuple[str, str, str]]:
        rows = []
        for policy in self.policies:
            kind = str(getattr(policy, "kind", type(policy).__name__))
            describe = getattr(policy, "describe", None)
            try:
                detail = one_line(str(describe()), 200) if callable(describe) else ""
            except Exception as exc:
                detail = f"(describe failed: {_error_text(exc)})"
            rows.append((policy.name, kind, detail))
        return rows
