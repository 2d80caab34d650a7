"""A test that breaks the walls on purpose: run by tests/test_hermetic.py in a child pytest, whose run must fail
at its end naming both breaches (tests/hermetic.py's check). Not collected by the suite itself."""

from __future__ import annotations

import os
import socket
from pathlib import Path


def test_a_test_that_writes_in_the_real_home_and_looks_up_an_outside_address() -> None:
    # The real home's path comes in a variable the walls keep: the way a test could still reach it.
    (Path(os.environ["HERMETIC_PROBE_REAL_HOME"]) / ".config" / "agent-console" / "config.toml").write_text("x")
    # A numeric address and AI_NUMERICHOST: nothing leaves the machine, but the lookup is what a test that reaches
    # an outside server starts with.
    socket.getaddrinfo("192.0.2.1", 443, flags=socket.AI_NUMERICHOST)
