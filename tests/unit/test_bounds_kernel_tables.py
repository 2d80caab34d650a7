"""Kernel tables a confined command shares with the operator's user: it must not be able to fill them.

Found: the sandbox's uid is the operator's on the host (a user namespace maps it), and inotify's instances are
counted per host user (``fs.inotify.max_user_instances``, 128): a command made 126 and held them, and every
other program of the operator's user (the console's file watcher, an editor, ``tail -f``) got "Too many open
files" from ``inotify_init1`` until the command ended (up to its timeout). The seccomp filter now refuses the
file-watch interfaces (inotify, fanotify): ENOSYS, as for the keyrings.
"""

from __future__ import annotations

import ctypes
import os
import platform

import pytest

from console.engine.runtime import Runtime
from tests.commands_support import CONFINED, call, py

pytestmark = [pytest.mark.usefixtures("bwrap"),
              pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64"), reason="no filter for this arch")]

HOLD = ("import ctypes, os, platform\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "calls = {'x86_64': {'inotify_init': 253, 'fanotify_init': 300}, 'aarch64': {'fanotify_init': 262}}\n"
        "for name, n in sorted(calls[platform.machine()].items()):\n"
        "    r = libc.syscall(n, 0, 0)\n"
        "    print(name, r, os.strerror(ctypes.get_errno()) if r < 0 else 'ok')\n"
        "made = 0\n"
        "while made < 1000 and libc.inotify_init1(0) >= 0:\n"
        "    made += 1\n"
        "print('inotify_init1', made, os.strerror(ctypes.get_errno()))\n")


def test_a_command_cannot_take_the_operators_file_watches(rt: Runtime) -> None:
    out = call(rt, py(HOLD), CONFINED)
    got = out.content.splitlines()[1:]
    assert got[-1] == "inotify_init1 0 Function not implemented", out.content
    assert all(line.endswith("-1 Function not implemented") for line in got[:-1]), out.content
    # And the harness's user may still watch files (as a console following the run does).
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(0)
    assert fd >= 0, os.strerror(ctypes.get_errno())
    os.close(fd)
