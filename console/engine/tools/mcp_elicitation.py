"""A server's question to the run's operator (``elicitation/create``, form mode) during one of its tool calls, when
the operator enabled it for that server (``elicitation = true`` in its ``[[mcp.servers]]`` entry; a job's ``[[mcp]]``
cannot).

The engine owns this port, as it owns sampling's (console.engine.tools.mcp_sampling): ``console.mcp`` turns the
SDK's request into an :class:`ElicitAsk` and is lent an :data:`Elicit` for the length of one tool call, run on the
engine's thread (the one waiting for the call's answer). The question becomes the run's need (``mcp_question``:
the views show it first, the operator's channels are told, ``jobs`` says "needs you"), with the server's message
and its form's fields (console.engine.questions: a form that is not flat and bounded is refused whole, as is a URL
to open). The operator answers with ``agent-console answer RUN --set NAME=VALUE``, ``--decline`` or ``--cancel``
(checked against the form; a wrong answer is refused and the question waits on); their stop, the question's time
(``elicitation_timeout``, within the call's and the job's deadline) or the call's end cancel it.

Why the question reaches the log at once: the events of a step in flight are held until its commit (a kill must not
log what the step's redo logs again), but a need that waits for a human must be seen now, by ``attach``, ``jobs``,
the fleet and ``agent-console answer`` in other processes. So the call's intent is journaled again first (the
questions asked, how much of its sampling is logged), then what the step holds is written (:meth:`EventStream.observe`):
a resume that finds the call interrupted counts the sampling logged so far without logging it again. What a kill
during the wait leaves in the log beyond an uninterrupted run's: the call's ``tool_called`` once more (the redo's),
and the question, unanswered (the resumed process's ``session_started`` clears it from the views).
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from console.engine import events as ev
from console.engine.needs import answered, ask_operator
from console.engine.operator import Aborted
from console.engine.questions import MAX_FIELDS, MAX_LINE, MAX_MESSAGE, Action, FormRefused, Question, Value, parse_form
from console.engine.text import safe_text
from console.engine.tools.mcp_config import McpServerConfig
from console.engine.tools.mcp_sampling import AskRefused

if TYPE_CHECKING:
    from console.engine.operator import OperatorState
    from console.engine.runtime import Runtime

# How often the wait looks at the operator's inbox, the call and the clock (seconds).
LOOK = 0.1


@dataclass(frozen=True)
class ElicitAsk:
    """A server's elicitation request as the engine takes it: its message and ``requestedSchema`` (checked here);
    ``refused``: why the MCP layer could not take it (a URL to open), "" when it could."""

    message: str
    schema: Any
    refused: str = ""


@dataclass(frozen=True)
class ElicitAnswer:
    action: Action
    content: dict[str, Value]


@dataclass(frozen=True)
class Elicit:
    """What console.mcp is lent for one tool call: the operator's answer to one question of the server, or
    AskRefused (its second argument says whether the call is over: the server gave up on it, and the question is
    cancelled); ``wait``: how long one question may wait (the call's own timeout grows by it meanwhile)."""

    answer: Callable[[ElicitAsk, Callable[[], str]], ElicitAnswer]
    wait: float

    def __call__(self, request: ElicitAsk, over: Callable[[], str]) -> ElicitAnswer:
        return self.answer(request, over)


@dataclass(frozen=True)
class Questioner:
    """The run's operator, as a server's questions reach them: made once by the supervisor (over its operator
    state), lent to each call of a server the operator enabled elicitation for (:meth:`for_call`)."""

    operator: OperatorState

    def for_call(self, rt: Runtime, config: McpServerConfig, tool: str, call_id: str,
                 log_now: Callable[[list[str]], None], timeout: float) -> Elicit:
        """The elicit of one call of ``tool``, whose questions may wait ``timeout`` seconds at most each (the
        question's time, within the job's deadline: the caller says); ``log_now`` journals the ids asked so far
        with the call's intent, then writes what the step holds to the log."""
        asked: list[str] = []
        # Every request of the call counts against its cap, the refused ones too (a server sending forms no client
        # asks, one after another, would otherwise write an event each into the log); past the cap, the refusal
        # is logged once.
        tried = [0]

        def elicit(request: ElicitAsk, over: Callable[[], str]) -> ElicitAnswer:
            def refuse(why: str, logged: bool = True) -> AskRefused:
                if logged:
                    rt.events.emit(ev.McpElicited, server=config.name, tool=tool, call_id=call_id,
                                   refused=safe_text(why, one_line=True, limit=300))
                return AskRefused(why)

            tried[0] += 1
            if tried[0] > config.elicitation_per_call:
                raise refuse(f"at most {config.elicitation_per_call} questions are asked during one tool call "
                             "(elicitation_per_call in the operator's config)",
                             logged=tried[0] == config.elicitation_per_call + 1)
            if request.refused:
                raise refuse(request.refused)
            try:
                fields = parse_form(request.schema)
            except FormRefused as exc:
                raise refuse(f"its form is not one the operator is asked: {exc}") from None
            op = self.operator
            # What was sent before this question is asked answers none: the commands waiting now (the inbox is
            # read while a tool runs only every POLL_INTERVAL) are applied first, an answer among them refused as
            # one with no question waiting, never taken by this question once it waits.
            with contextlib.suppress(Aborted):
                op.apply(rt, streaming=True, look=True)
            if op.needs is not None or op.question is not None:
                raise refuse("the run waits for its operator about something else now")
            if op.stop_requested:
                raise refuse("the run is stopping: no question is asked")
            qid = "q" + secrets.token_hex(3)
            asked.append(qid)
            return self._ask(rt, config, tool, call_id, Question(qid, config.name, fields), request, over,
                             lambda: log_now(list(asked)), timeout)

        return Elicit(elicit, timeout)

    def _ask(self, rt: Runtime, config: McpServerConfig, tool: str, call_id: str, q: Question, request: ElicitAsk,
             over: Callable[[], str], log_now: Callable[[], None], timeout: float) -> ElicitAnswer:
        op = self.operator
        message = safe_text(request.message, join=True, one_line=True, limit=MAX_MESSAGE) or "(no message)"
        name = safe_text(config.name, one_line=True, limit=40)
        evidence = [f.line() for f in q.fields] or ["(no fields: answer with no values to accept, or decline)"]
        op.question = q
        began = time.monotonic()
        ends = began + timeout
        by = ""
        guards = getattr(rt, "guards", None)  # the job's deadline (its time left was the call's bound at its start)
        try:
            ask_operator(rt.events, op, "mcp_question",
                         f"MCP server {name} asks (question {q.id}, during {safe_text(tool, one_line=True, limit=60)}"
                         f"): {message}", evidence, pause=False, lines=MAX_FIELDS, chars=MAX_LINE)
            log_now()
            while q.action is None:
                # The operator's commands are read here (an answer is applied at once: console.engine.operator).
                if rt.should_stop() or op.stop_requested:
                    by = "the operator's stop"
                elif ended := over():  # the call's end, or the server withdrew its question
                    by = ended
                elif time.monotonic() >= ends:
                    by = f"no answer within {timeout:g} s"
                elif guards is not None and (cut := guards.seconds_to_cut()) is not None and cut <= 0:
                    by = "the job's deadline passed"
                if by:
                    break
                if rt.events.holds_lines:  # a wrong answer's refusal: said to `agent-console answer` now
                    log_now()
                time.sleep(LOOK)
        except BaseException:
            # The wait failed (a fault of the harness: the server is refused, said by console.mcp): the question is
            # over, and so is the need it was, or the views say "needs you" for it and later questions are refused.
            answered(rt.events, op, "the harness could not wait for the answer")
            raise
        finally:
            op.question = None
        action: Action = q.action or "cancel"
        answered(rt.events, op, q.by or by)
        waited = round(time.monotonic() - began, 3)
        rt.events.emit(ev.McpElicited, server=config.name, tool=tool, call_id=call_id, question=q.id, action=action,
                       fields=sorted(q.content), by=q.by or by, waited_s=waited)
        log_now()  # the answer's confirmation reaches `agent-console answer` now, not at the call's end
        return _answer(action, q.content)


def _answer(action: Action, content: dict[str, Value]) -> ElicitAnswer:
    return ElicitAnswer(action, dict(content) if action == "accept" else {})
