"""The run's header for its commands (the ``command_sandbox`` event: what a command sees, its bounds): one line of
the headless log, a notice in the console's feedback pane, the paragraph in the guardrails view; said as a warning
when commands run unconfined and as an error when they are refused."""

from __future__ import annotations

import io

from console import present
from console.engine import events as ev
from console.headless import HeadlessLog
from console.tui.screens.guardrails import plain_text
from console.tui.state import ConsoleState
from tests.hostile import ATTACK, SHOWN, raw_controls
from tests.tui.conftest import FROZEN_NOW
from tests.tui.guardrail_events import Log, status

CONFINED = ("commands are confined by bubblewrap 0.11.0: they see the job folder (read-write); no network (not even "
            "loopback); nothing else of the host. Bounds: wall time 120 s, 256 processes")


def header_log(mode: str, text: str) -> Log:
    log = Log()
    log.add(ev.CommandSandbox, mode=mode, tool="bubblewrap 0.11.0", bounds_by="rlimits", commands=["test"],
            text=text)
    status(log)
    return log


def test_the_header_is_a_line_of_the_log_a_notice_and_a_paragraph_of_the_guardrails_view() -> None:
    log = header_log("confined", CONFINED)
    out = io.StringIO()
    headless = HeadlessLog(out)
    for e in log.events:
        headless(e)
    assert out.getvalue().splitlines() == [f"  ▣ {CONFINED}"]
    st = ConsoleState("job")
    st.apply_all(log.events)
    assert [(i.icon, i.severity, i.message) for i in st.feedback] == [("▣", "info", CONFINED)]
    assert CONFINED in " ".join(plain_text(st, FROZEN_NOW).split())


def test_unconfined_and_refused_commands_are_said_louder_and_the_text_stays_text() -> None:
    unconfined = present.describe(header_log("unconfined", "commands run UNCONFINED").events[0])
    refused = present.describe(header_log("refused", f"commands (test) are refused {ATTACK}").events[0])
    assert unconfined is not None and unconfined.severity == "warning"
    assert refused is not None and refused.severity == "error" and refused.text.endswith(SHOWN)
    st = ConsoleState("job")
    st.apply_all(header_log("refused", f"refused {ATTACK}").events)
    assert not raw_controls(plain_text(st, FROZEN_NOW))
