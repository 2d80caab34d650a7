"""What the parts of one run's screen share: the run (its controller and folder), the fold of its events, and what
this console asked of it. One object, handed to each part (:class:`console.tui.screens.run.RunScreen` makes it):
no part reaches up to the screen, each gets this and the few functions it needs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from console.engine.job_files import JobPaths
from console.tui.commands import Controller
from console.view.run_offers import RunFacts
from console.view.state import ConsoleState


class Notify(Protocol):
    """Textual's ``notify`` (a toast; held while a question is up: console.tui.notices)."""

    def __call__(self, message: str, *, title: str = ..., severity: Any = ..., timeout: float | None = ...) -> None:
        ...


# Show a question; the function gets its answer (a dialog: console.tui.screens.dialog.Dialog).
Ask = Callable[[Any, Callable[[Any], None]], None]


@dataclass
class RunContext:
    """One run as its screen's parts see it."""

    state: ConsoleState
    controller: Controller
    paths: JobPaths
    run_id: str = ""
    finished: bool = False  # the run of this process has ended (its engine returned)
    quit_requested: bool = False  # the console closes once the run has stopped
    exit_code: int | None = None  # the run's, once it has ended
    rewind_text: str = ""  # the text of the last rewind sent (kept while it may be refused: r offers it again)
    # The values of the last answer sent to a question (kept while it may be refused: the answer box offers them).
    answer_values: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """How a question names the run: its id (``resume ID`` finds it anywhere), else its folder."""
        return self.run_id or str(self.paths.root)

    @property
    def host(self) -> str:
        """The machine that runs it, when it is not this one ("": this one)."""
        return self.controller.host

    @property
    def resume_hint(self) -> str:
        """How its controller says the run is resumed ("": ``agent-console resume ID`` here)."""
        return self.controller.resume_hint

    def facts(self) -> RunFacts:
        """What the keys' offers depend on, read now (whether a process holds the run may read its lock)."""
        controller = self.controller
        return RunFacts(self.state, controller.attached, controller.runner_pid(), self.finished,
                        startable=controller.startable, local=controller.local)

    @property
    def active(self) -> bool:
        """The run can act on a command now."""
        if self.controller.attached:
            return self.controller.runner_pid() is not None and not self.state.ended
        return not self.finished
