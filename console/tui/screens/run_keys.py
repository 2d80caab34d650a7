"""The operator's commands to one run (the actions of :data:`console.tui.keymap.OPERATOR_KEYS` that act on it):
:class:`RunCommands`, a part of :class:`console.tui.screens.run.RunScreen`.

Every command goes through the run's controller (the supervisor for a run in this process, the job's inbox for one
attached), and what this console asked for shows at once in the status line and the footer. What a key offers now,
and why one does nothing, is decided without Textual (console.view.run_offers); this part says it and acts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from console.engine.commands import (
    Answer,
    AnyCommand,
    ApproveRestart,
    Checkpoint,
    CommandError,
    DenyRestart,
    Pause,
    Resume,
    Rewind,
    Stop,
)
from console.engine.questions import question_id
from console.tui.screens.answer import Answered, AnswerScreen
from console.tui.screens.approval import NOTICE_TITLE, deny_question
from console.tui.screens.confirm import ConfirmScreen
from console.tui.screens.rewind import RewindScreen
from console.tui.screens.run_context import Ask, Notify, RunContext
from console.view.answering import resume_in_background
from console.view.liveness import resume_text
from console.view.run_offers import ended_refusal, pausing, phase_refused, resume_way

# Run ``work`` on a worker thread of the screen (cancelled with it), then ``done`` with its result on the UI's.
InBackground = Callable[[Callable[[], Any], Callable[[Any], None], str], None]


def acknowledge_here(ctx: RunContext) -> Callable[[], Any]:
    """What ``k`` does on a worker thread: acknowledge the run (console.view.answering), with the jobs store."""
    paths, name = ctx.paths, f"{ctx.run_id} {ctx.paths.root.name}"

    def work() -> Any:
        from console.settings import load_settings
        from console.view.answering import acknowledge_run

        return acknowledge_run(paths, name, "console", lambda: load_settings().open_store())

    return work


class RunCommands:
    """The run's commands, sent through its controller; a refusal is said, never sent."""

    def __init__(self, ctx: RunContext, *, notify: Notify, ask: Ask, sent: Callable[[], None],
                 runner_changed: Callable[[], None], retract: Callable[[str], None], resume_key: Callable[[], str],
                 in_background: InBackground, ui_alive: Callable[[], bool], animations: bool = True) -> None:
        """``sent``: a command went out (draw its effect at once: the status line, the footer); ``runner_changed``:
        whether a process runs the run changed, or what this console asked of it; ``retract``: take back the
        notices of a title; ``resume_key``: the key that resumes (p, as the operator's key map has it)."""
        self.ctx = ctx
        self.notify = notify
        self.ask = ask
        self.sent = sent
        self.runner_changed = runner_changed
        self.retract = retract
        self.resume_key = resume_key
        self.in_background = in_background
        self.ui_alive = ui_alive
        self.animations = animations

    def send(self, command: AnyCommand, pending: str) -> bool:
        """Send ``command`` (built by the key's handler); ``pending``: what the status line says until the engine
        answers. False (and said) when it could not be sent."""
        problem = self.ctx.controller.send(command)
        if problem:
            self.not_sent(command.kind, problem)
            return False
        self.ctx.state.requested[command.kind] = pending
        self.sent()
        return True

    def not_sent(self, kind: str, problem: str) -> None:
        self.notify(problem, title=f"{kind.replace('_', ' ')} not sent", severity="warning")

    def ended_notice(self, command: str) -> bool:
        """Say why a run command does nothing now (palette, or a key the footer no longer shows); True if so."""
        facts = self.ctx.facts()
        refusal = ended_refusal(command, facts, resume_way(facts, self.ctx.run_id, self.ctx.resume_hint,
                                                           self.resume_key()) if not facts.active else "")
        if refusal is None:
            return False
        self.notify(refusal.message, title=refusal.title)
        return True

    def phase_notice(self, command: str) -> bool:
        """Say why a checkpoint or rewind cannot apply in this phase (the engine would refuse it); True if so."""
        refusal = phase_refused(command, self.ctx.state)
        if refusal is not None:
            self.notify(refusal.message, title=refusal.title)
        return refusal is not None

    # -- the commands ------------------------------------------------------------------------------------
    def acknowledge(self) -> None:
        if not self.ctx.facts().can_acknowledge:
            self.notify("Only a run that gave up, crashed or failed, and that no process runs, is acknowledged.",
                        title="Nothing to acknowledge")
            return
        self.in_background(acknowledge_here(self.ctx), self._acknowledged, "acknowledge")

    def _acknowledged(self, said: Any) -> None:
        self.notify(said.message, title=said.title, severity=said.severity)

    def checkpoint(self) -> None:
        if self.ended_notice("checkpoint") or self.phase_notice("checkpoint"):
            return
        self.send(Checkpoint(), "checkpoint requested")

    def rewind(self) -> None:
        if self.ended_notice("rewind") or self.phase_notice("rewind"):
            return
        ctx = self.ctx
        todos = ctx.state.todos
        # The phase the dialog names; the engine refuses the rewind if it has ended by the time it lands.
        number = todos.phase_number if todos is not None and todos.kind in ("phase", "transition") and \
            todos.phase_number > 0 else None

        def done(issue: str | None) -> None:
            if not issue:
                return
            try:  # the operator's text: what the command refuses (too long) is said, as a refusal to send
                command = Rewind.build(issue=issue, phase=number)
            except CommandError as exc:
                self.not_sent("rewind", str(exc))
                return
            if self.send(command, "rewind requested"):
                ctx.rewind_text = issue  # kept until the engine applies it: a refused rewind's words are not lost

        self.ask(RewindScreen(ctx.state.phase, number=number, blink=self.animations, text=ctx.rewind_text), done)

    def answer(self) -> None:
        """The palette's "Answer question": the question an MCP server asks now, in a dialog; none: said, not sent."""
        need = self.ctx.state.needs
        qid = question_id(need.message) if need is not None and need.reason == "mcp_question" else None
        if need is None or qid is None:
            self.not_sent("answer", "no question of an MCP server waits for an answer now")
            return

        def done(answered: Answered) -> None:
            if answered is None:
                return
            action, values = answered
            try:
                command = Answer.build(question=qid, set=tuple(f"{k}={v}" for k, v in values.items()) or None,
                                       decline=action == "decline" or None, cancel=action == "cancel" or None)
            except CommandError as exc:
                self.not_sent("answer", str(exc))
                return
            if self.send(command, "answer sent" if action == "accept" else f"{action} sent"):
                self.ctx.answer_values = dict(values)  # a refused answer's values are offered again

        self.ask(AnswerScreen(need.message, need.evidence, values=self.ctx.answer_values), done)

    def approve(self) -> None:
        self.retract(NOTICE_TITLE)  # "restart pending" is answered (the other notices stay)
        self.send(ApproveRestart(), "approval sent")

    def deny(self) -> None:
        """d (the restart's banner), the palette: it ends the run, so it asks first (deny_question says why)."""
        self.ask(deny_question(self.ctx.name, self.ctx.host), lambda yes: self.deny_restart() if yes else None)

    def deny_restart(self) -> None:
        self.retract(NOTICE_TITLE)
        self.send(DenyRestart(), "denial sent")

    def toggle_pause(self) -> None:
        """One key (the footer never has to change): resume when paused or pausing, pause otherwise."""
        if pausing(self.ctx.state):
            self.resume_run()
        else:
            self.pause()

    def pause(self) -> None:
        if self.ended_notice("pause"):
            return
        self.ctx.state.requested.pop("resume", None)
        self.send(Pause(), "pausing after this turn")

    def resume_run(self) -> None:
        if self.ctx.facts().can_start_again:
            self._start_again()
            return
        if self.ended_notice("resume"):
            return
        self.ctx.state.requested.pop("pause", None)
        self.send(Resume(), "resuming")

    def _start_again(self) -> None:
        """Resume a run no process runs: asked first, then ``agent-console resume`` in the background (the fleet's
        way); this console follows the run once its new process holds it."""
        ctx = self.ctx

        def done(yes: bool | None) -> None:
            if yes and ctx.facts().can_start_again:
                ctx.state.requested["start"] = "starting again"
                self.runner_changed()
                self.start_again()

        self.ask(ConfirmScreen(f"Resume {ctx.name}?", resume_text(ctx.state, ctx.name), "Resume", "Leave it"), done)

    def start_again(self) -> None:
        root = self.ctx.paths.root
        # The module's name looked up when it runs (a test stands in for the real resume).
        self.in_background(lambda: resume_in_background(root, "console"), self._started_again, "start-again")

    def _started_again(self, problem: str | None) -> None:
        if problem is None:
            self.notify("The run runs again, in the background: this console follows it.", title="Resumed")
            return
        self.ctx.state.requested.pop("start", None)
        self.notify(problem, title="Not resumed", severity="error", timeout=15)
        if self.ui_alive():
            self.runner_changed()

    def stop(self) -> None:
        if self.ended_notice("stop"):
            return
        ctx = self.ctx
        again = ctx.state.stopping or "stop" in ctx.state.requested

        def done(yes: bool | None) -> None:
            if yes:
                self.send(Stop(), "stopping now" if again else "stopping after this turn")

        resume = ctx.resume_hint or f"agent-console resume {ctx.run_id}"
        if again:
            self.ask(ConfirmScreen("Stop now?", "The current turn is abandoned (its half-written reply is "
                                   f"dropped); the run can be resumed with `{resume}`.", "Stop now", "Wait"), done)
        else:
            self.ask(ConfirmScreen("Stop the run?", "The run stops at once if it is waiting for the model "
                                   "(the reply in progress is asked again on resume), else after the "
                                   f"current turn's tool calls. Resume it later with `{resume}`.", "Stop",
                                   "Keep running"), done)
