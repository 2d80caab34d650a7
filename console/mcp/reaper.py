"""What an unconfined MCP server leaves behind ends with it: ``python -m console.mcp.reaper -- ARGV...``.

Confined, a server runs in a pid namespace of its own, and every process it starts ends with it (bubblewrap's
``--die-with-parent``; the namespace's init). Unconfined (``run --unconfined``, the operator's choice) it runs as
a plain child, and killing its process group misses what it moved to a session of its own (``setsid``, a double
fork): that outlived the run. A command has the same problem for one call, and the harness is its "child
subreaper" for that while (console.engine.tools.bounding); a server lives the whole run, and a harness that is a
subreaper the whole run would collect every orphan of every child it has. So the server gets a process of its own
in between: this one. It is the subreaper of the server's tree, starts the server with its own stdin, stdout and
stderr (the client talks to the server through them, untouched), and when the server exits, or this process is
told to end (SIGTERM from the client's close; SIGTERM too when the harness dies, by PR_SET_PDEATHSIG), it kills and
reaps every process left under it, then exits with the server's status."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading

from console.engine.tools.bounding import SUBREAPER, reap_orphans

_PR_SET_PDEATHSIG = 1


def _parent_death_signal(sig: int) -> None:
    with contextlib.suppress(Exception):  # not Linux: the client's close still ends the tree
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "--" or len(argv) < 2:
        sys.stderr.write("usage: python -m console.mcp.reaper -- ARGV...\n")
        return 2
    parent = os.getppid()
    _parent_death_signal(signal.SIGTERM)
    if os.getppid() != parent:  # the harness died before the signal was asked for: nothing to serve
        return 1
    if not SUBREAPER.enter():
        sys.stderr.write("console.mcp.reaper: cannot be the server's subreaper here\n")
        return 1
    ending = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: ending.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal's ^C is the harness's to handle
    try:
        server = subprocess.Popen(argv[1:])
    except OSError as exc:
        sys.stderr.write(f"cannot start {argv[1]}: {exc.strerror or exc}\n")
        return 127
    # Waited for in a thread, so that a SIGTERM (handled between bytecodes of this one) is heard at once.
    def wait() -> None:
        server.wait()
        ending.set()

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    while not ending.wait(0.5):  # in steps: a signal's handler runs between them at the latest
        pass
    if server.poll() is None:
        server.kill()
        server.wait()
    reap_orphans(set())  # every process left under this one: the server's whole tree
    code = server.returncode
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
