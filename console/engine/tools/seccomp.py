"""A seccomp filter for job-declared commands: the few system calls the sandbox's namespaces do not cover.

bubblewrap drops every capability, but when the operator is root the command's uid is still the host's uid 0
(a user namespace maps 0 to 0), and a handful of kernel interfaces check the uid, not a capability. What this
filter refuses, for the command and everything it starts (bwrap installs it with ``--seccomp`` just before it
runs the command; no_new_privs keeps it for good):

- the kernel keyrings (``add_key``, ``keyctl``, ``request_key``): keyed by uid, they would reach the
  operator's (root's) keys;
- a setuid or setgid bit on any file (``chmod``, ``fchmod``, ``fchmodat(2)``, and ``open``, ``openat``,
  ``creat``, ``mknod``, ``mknodat`` creating one): inside the sandbox such a file is harmless (``nosuid``), but
  it lands in the job folder, where another user of the host could run it as the operator;
- interfaces with a history of kernel exploits that no build or test needs: ``bpf``, ``userfaultfd``,
  ``perf_event_open``, ``io_uring`` (programs fall back: the calls say ENOSYS, "not implemented");
- file watches (``inotify_init``, ``inotify_init1``, ``fanotify_init``): their instances and watches are
  counted per user of the host (``fs.inotify.max_user_instances``, 128 by default), and the sandbox's uid is the
  operator's, so a command holding them all (126 measured, in milliseconds) left every program of the operator's
  user, the console's file watcher included, unable to watch a file until it ended. A build or a test run does
  not need to be told of changes; a tool that watches falls back to polling, as on a host whose limit is reached;
- ``fallocate`` with ``FALLOC_FL_KEEP_SIZE``: blocks allocated past a file's end escape RLIMIT_FSIZE (one call
  could take the whole disk before the job folder's watch looks); a plain ``fallocate`` stays bounded by it
  (programs fall back: the call says EOPNOTSUPP, "not supported");
- system calls of another architecture (32-bit ``int 0x80`` calls on x86-64, the x32 ABI), which would
  bypass the checks above: a 32-bit program cannot run in the sandbox.

Built by hand as classic BPF (the program is a few dozen instructions; libseccomp is not in the stdlib), for
x86-64 and aarch64; elsewhere there is no filter and the run's header says so. The sandbox's read-only
``/proc`` closes the other uid-checked door, ``/proc/sys`` (see :mod:`.confine`).
"""

from __future__ import annotations

import errno
import functools
import platform
import struct

# struct sock_filter: u16 code, u8 jt, u8 jf, u32 k
_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6] (little-endian: low word first)
_NR, _ARCH, _ARGS = 0, 4, 16
SETID_BITS = 0o6000  # S_ISUID | S_ISGID

FALLOC_FL_KEEP_SIZE = 0x01
# arch: (AUDIT_ARCH, refused calls (ENOSYS), calls whose mode argument may not carry SETID_BITS: nr -> arg index,
#        fallocate's number, lowest number of a foreign ABI to refuse too (x32), or None)
_ARCHES: dict[str, tuple[int, dict[str, int], dict[str, tuple[int, int]], int, int | None]] = {
    "x86_64": (
        0xC000003E,
        {"add_key": 248, "request_key": 249, "keyctl": 250, "perf_event_open": 298, "bpf": 321, "userfaultfd": 323,
         "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "inotify_init": 253,
         "inotify_init1": 294, "fanotify_init": 300},
        {"open": (2, 2), "chmod": (90, 1), "fchmod": (91, 1), "creat": (85, 1), "mknod": (133, 1),
         "openat": (257, 3), "mknodat": (259, 2), "fchmodat": (268, 2), "fchmodat2": (452, 2)},
        285,
        0x40000000,
    ),
    "aarch64": (
        0xC00000B7,
        {"add_key": 217, "request_key": 218, "keyctl": 219, "perf_event_open": 241, "bpf": 280, "userfaultfd": 282,
         "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "inotify_init1": 26,
         "fanotify_init": 262},
        {"mknodat": (33, 2), "fchmod": (52, 1), "fchmodat": (53, 2), "openat": (56, 3), "fchmodat2": (452, 2)},
        47,
        None,
    ),
}
_MACHINES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def arch_name() -> str | None:
    """This machine's architecture as the filter knows it, or None where there is no filter for it."""
    return _MACHINES.get(platform.machine().lower())


@functools.cache
def program(arch: str | None = None) -> bytes | None:
    """The filter as bwrap's ``--seccomp`` takes it (struct sock_filter[]), or None for an unknown arch."""
    arch = arch or arch_name()
    if arch not in _ARCHES:
        return None
    audit, refused, setid, fallocate, foreign = _ARCHES[arch]
    deny = RET_ERRNO | errno.ENOSYS
    refuse_setid = RET_ERRNO | errno.EPERM
    out = [_ins(_LD_ABS, _ARCH), _ins(_JEQ, audit, 1, 0), _ins(_RET, deny), _ins(_LD_ABS, _NR)]
    if foreign is not None:
        out += [_ins(_JGE, foreign, 0, 1), _ins(_RET, deny)]
    for nr in sorted(refused.values()):
        out += [_ins(_JEQ, nr, 0, 1), _ins(_RET, deny)]
    # Each checked call: if nr matches, load its mode argument, refuse a forbidden bit, else allow.
    checks = [(nr, arg, SETID_BITS, refuse_setid) for nr, arg in setid.values()]
    checks.append((fallocate, 1, FALLOC_FL_KEEP_SIZE, RET_ERRNO | errno.EOPNOTSUPP))
    for nr, arg, bits, verdict in sorted(checks):
        out += [_ins(_JEQ, nr, 0, 4), _ins(_LD_ABS, _ARGS + 8 * arg), _ins(_JSET, bits, 0, 1),
                _ins(_RET, verdict), _ins(_RET, RET_ALLOW)]
    out.append(_ins(_RET, RET_ALLOW))
    return b"".join(out)
