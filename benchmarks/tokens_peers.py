"""The peers' context policies as benchmarks/tokens.py simulates them, each from its own code or documentation.

Each rule takes the conversation a client holds (the unmanaged run's request) and returns what the model is
sent. Tool results are replaced, never removed: the message list keeps its length, roles and call ids, so no
peer splits a tool call from its result (the benchmark checks it anyway).

- SWE-agent, ``LastNObservations`` (sweagent/agent/history_processors.py; n=5, polling=1 is the setting of the
  SWE-agent paper and of its 0.7 config): the instance template (the first user message) and the last n
  observations keep their content; every other observation becomes ``Old environment output: (N lines
  omitted)``. Re-applied to the whole history before every query.
- Anthropic context editing, ``clear_tool_uses_20250919`` (docs.claude.com, build-with-claude/context-editing):
  ``trigger`` (input tokens, default 100,000): when the prompt exceeds it, the oldest tool results are cleared
  until only ``keep`` (default 3) tool uses keep theirs; ``clear_at_least`` (default none): if the clearing
  would free fewer tokens than this, it is not applied (so as not to break the prompt cache for little);
  ``clear_tool_inputs`` false and ``exclude_tools`` none here. The edit runs server-side; the client keeps and
  sends its full history. The docs do not say whether a clearing is decided afresh on every request from the
  full history (``stateless``: past the trigger, every request clears all but the last ``keep``) or whether a
  clearing stays until the edited prompt exceeds the trigger again (``sticky``: "subsequent requests can reuse
  the newly cached prefix"), so both are simulated and the cheaper is the peer's. The placeholder's exact
  text is not published: ``[cleared]`` (LangChain's mirror of this strategy) stands for it.
- OpenHands, ``ObservationMaskingCondenser`` (openhands/memory/condenser/impl/observation_masking_condenser.py):
  every event of the view is kept, but an observation whose index is before ``len(view) - attention_window``
  gets the content ``<MASKED>``; ``attention_window`` defaults to 100 events in its config
  (ObservationMaskingCondenserConfig in openhands/core/config/condenser_config.py; the class's own default of 5
  is never what a configured run gets). Events are the task message, each action (one per tool call) and each
  observation; re-applied before every step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from console.engine.context.tokens import estimate_message
from console.engine.messages import Message

SWE_AGENT_N = 5
SWE_AGENT_PLACEHOLDER = "Old environment output: ({lines} lines omitted)"
ANTHROPIC_TRIGGER = 100_000
ANTHROPIC_KEEP = 3
ANTHROPIC_PLACEHOLDER = "[cleared]"
OPENHANDS_WINDOW = 100
OPENHANDS_PLACEHOLDER = "<MASKED>"


def swe_agent_last_n(messages: list[Message], n: int = SWE_AGENT_N) -> list[Message]:
    """SWE-agent's LastNObservations(n, polling=1): elide all observations but the template and the last n.

    In SWE-agent the observations are the instance template (the first user message) and every tool
    output; ``observation_indices[1:len - n]`` are elided, so the template always stays.
    """
    observations = [i for i, m in enumerate(messages) if m.role == "tool"]
    first_user = next((i for i, m in enumerate(messages) if m.role == "user"), None)
    if first_user is not None and (not observations or first_user < observations[0]):
        observations.insert(0, first_user)
    omit = set(observations[1:max(0, len(observations) - n)])
    if not omit:
        return messages
    return [m.model_copy(update={"content": SWE_AGENT_PLACEHOLDER.format(lines=len(m.content.splitlines()))})
            if i in omit else m for i, m in enumerate(messages)]


def _clear(messages: list[Message], ids: set[str]) -> list[Message]:
    return [m.model_copy(update={"content": ANTHROPIC_PLACEHOLDER}) if m.role == "tool" and m.tool_call_id in ids
            else m for m in messages]


def _freed(messages: list[Message], ids: set[str]) -> int:
    placeholder = estimate_message(Message(role="tool", content=ANTHROPIC_PLACEHOLDER))
    return sum(estimate_message(m) - placeholder for m in messages if m.role == "tool" and m.tool_call_id in ids)


def anthropic_clear_tool_uses(messages: list[Message], prompt_tokens: int, trigger: int | None = None,
                              keep: int = ANTHROPIC_KEEP, clear_at_least: int = 0) -> list[Message]:
    """clear_tool_uses_20250919, stateless: past the trigger, clear all tool results but the last ``keep``.

    ``prompt_tokens`` is the whole prompt as the client sent it (the trigger counts input tokens).
    """
    if prompt_tokens <= (ANTHROPIC_TRIGGER if trigger is None else trigger):
        return messages
    results = [m.tool_call_id or "" for m in messages if m.role == "tool"]
    clear = set(results[:max(0, len(results) - keep)])
    if not clear or _freed(messages, clear) < clear_at_least:
        return messages
    return _clear(messages, clear)


@dataclass
class StickyClearing:
    """clear_tool_uses_20250919, sticky: a clearing stays; the trigger is measured on the edited prompt."""

    trigger: int = ANTHROPIC_TRIGGER
    keep: int = ANTHROPIC_KEEP
    clear_at_least: int = 0
    cleared: set[str] = field(default_factory=set)

    def __call__(self, messages: list[Message], prompt_tokens: int) -> list[Message]:
        present = {m.tool_call_id for m in messages if m.role == "tool"}
        self.cleared &= present  # a new session of the client's own (a restart) starts afresh
        edited = _clear(messages, self.cleared)
        size = prompt_tokens - _freed(messages, self.cleared)
        if size <= self.trigger:
            return edited
        results = [m.tool_call_id or "" for m in messages if m.role == "tool"]
        more = set(results[:max(0, len(results) - self.keep)]) - self.cleared
        if not more or _freed(messages, more) < self.clear_at_least:
            return edited
        self.cleared |= more
        return _clear(messages, self.cleared)


def openhands_observation_masking(messages: list[Message], attention_window: int = OPENHANDS_WINDOW
                                  ) -> list[Message]:
    """OpenHands' ObservationMaskingCondenser: observations outside the last ``attention_window`` events masked."""
    events = [i for i, m in enumerate(messages) if m.role != "system"]
    cutoff = len(events) - attention_window
    masked = {i for k, i in enumerate(events) if k < cutoff and messages[i].role == "tool"}
    if not masked:
        return messages
    return [m.model_copy(update={"content": OPENHANDS_PLACEHOLDER}) if i in masked else m
            for i, m in enumerate(messages)]
