"""A seccomp filter for job-declared commands: the few system calls the sandbox's namespaces do not cover.

bubblewrap drops every capability, but when the operator is root the command's uid is still the host's uid 0
(a user namespace maps 0 to 0), and a handful of kernel interfaces check the uid, not a capability. What this
filter refuses, for the command and everything it starts (bwrap installs it with ``--seccomp`` just before it
runs the command; no_new_privs keeps it for good):

- the kernel keyrings (``add_key``, ``keyctl``, ``request_key``): keyed by uid, they would reach the
  operator's (root's) keys;
- a setuid or setgid bit on any file (``chmod``, ``fchmod``, ``fchmodat(2)``, and ``open``, ``openat``,
  ``creat``, ``mknod``, ``mknodat`` creating one): inside the sandbox such a file is harmless (``nosuid``), but
  it lands in the job folder, where another user of the host could run it as the operator. ``openat2`` takes its
  mode in a struct, which a classic BPF filter cannot read, so it is refused (ENOSYS: glibc, systemd and the
  others fall back to ``openat``, as on a kernel before 5.6);
- interfaces with a history of kernel exploits that no build or test needs: ``bpf``, ``userfaultfd``,
  ``perf_event_open``, ``io_uring`` (programs fall back: the calls say ENOSYS, "not implemented");
- what Docker's default profile refuses a container without capabilities (moby's ``profiles/seccomp/default.json``):
  mounts and namespaces, kernel modules, kexec, swap, the clock, ``kcmp``, ``pidfd_getfd``, ``process_madvise``,
  ``move_pages`` and the NUMA policies, ``open_by_handle_at``, ``personality`` beyond the plain values, sockets of
  ``AF_ALG`` and ``AF_VSOCK``, a ``clone`` that makes a namespace, the obsolete calls; ``clone3`` says ENOSYS
  (its flags are in a struct; glibc falls back to ``clone``), as Docker's does; ``modify_ldt`` and
  ``memfd_secret`` too (see :data:`_EPERM_X86`). The capabilities bwrap drops refuse most of them already: the
  filter keeps a kernel bug behind them out of reach;
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

Built by hand as classic BPF (a couple of hundred instructions, each refused number compared in turn: libseccomp's
Python binding is built with the C library, not shipped as a wheel of its own), for
x86-64 and aarch64; elsewhere there is no filter and the run's header says so. The sandbox's read-only
``/proc`` closes the other uid-checked door, ``/proc/sys`` (see :mod:`.confine`).
"""

from __future__ import annotations

import errno
import functools
import platform
import re
import struct
from dataclasses import dataclass

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
AF_ALG, AF_VSOCK = 38, 40
# clone's flags that make a namespace (NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET), as Docker refuses
# them: bwrap's --disable-userns already does where the host lets it, and unshare and setns are refused outright.
CLONE_NAMESPACES = 0x7E020000
# personality(2) values a program may set, as Docker's profile allows: the plain Linux one, PER_LINUX32 (what
# `setarch i686` sets), UNAME26, both, and 0xffffffff (a query). Refused: ADDR_NO_RANDOMIZE and the other flags that
# weaken the process (READ_IMPLIES_EXEC, MMAP_PAGE_ZERO): EPERM, which setarch and gdb report and go on without.
PERSONALITIES = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)


@dataclass(frozen=True)
class Table:
    """One architecture's system call numbers, by what the filter does with them."""

    audit: int  # AUDIT_ARCH_*
    # Refused with ENOSYS ("not implemented"), so that a caller falls back as on an older kernel (openat2 to openat,
    # clone3 to clone, io_uring to plain reads).
    absent: dict[str, int]
    # Refused with EPERM ("not permitted"), as Docker's default profile refuses them to a container without the
    # capability (the sandbox has none).
    refused: dict[str, int]
    # Calls whose mode argument may not carry SETID_BITS: name -> (nr, arg index).
    setid: dict[str, tuple[int, int]]
    fallocate: int
    personality: int
    socket: int
    clone: int
    # ptrace, process_vm_readv, process_vm_writev: refused (EPERM) before Linux 4.8, where a tracer could change a
    # call after the filter had allowed it.
    tracing: dict[str, int]
    # Lowest number of a foreign ABI to refuse too (x32), or None.
    foreign: int | None


# What Docker's default profile refuses a container without capabilities (moby's profiles/seccomp/default.json)
# is refused here too, though the namespaces and the dropped capabilities refuse most of it already: a kernel bug
# behind one of those calls is then out of reach as well. Docker's list allows, so a call newer than it is refused:
# file_getattr and file_setattr (Linux 6.17) are here too, and programs fall back to their ioctls. ptrace and
# process_vm_readv/writev stay (Docker allows them from Linux 4.8, where seccomp sees a traced call again): a
# command sees only its own processes (its pid namespace), and debuggers, strace and LeakSanitizer (ASan's leak
# check at a test's exit) need them. modify_ldt and memfd_secret, which recent Docker allows, are refused: 16-bit
# segments (a 32-bit program cannot run here anyway) and memory the kernel cannot see are not what a build or a
# test needs, and both have had exploits or pin memory.
_ENOSYS_X86 = {"add_key": 248, "request_key": 249, "keyctl": 250, "perf_event_open": 298, "bpf": 321,
               "userfaultfd": 323, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
               "inotify_init": 253, "inotify_init1": 294, "fanotify_init": 300, "openat2": 437, "clone3": 435,
               "memfd_secret": 447, "uselib": 134, "ustat": 136, "sysfs": 139, "_sysctl": 156, "create_module": 174,
               "get_kernel_syms": 177, "query_module": 178, "nfsservctl": 180, "getpmsg": 181, "putpmsg": 182,
               "afs_syscall": 183, "tuxcall": 184, "security": 185, "vserver": 236, "lookup_dcookie": 212,
               "file_getattr": 468, "file_setattr": 469}
_EPERM_X86 = {"modify_ldt": 154, "kcmp": 312, "pidfd_getfd": 438, "process_madvise": 440, "move_pages": 279,
              "migrate_pages": 256, "mbind": 237, "set_mempolicy": 238, "get_mempolicy": 239,
              "set_mempolicy_home_node": 450, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
              "unshare": 272, "setns": 308, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
              "fsmount": 432, "fspick": 433, "mount_setattr": 442, "open_tree_attr": 467, "reboot": 169,
              "init_module": 175, "finit_module": 313, "delete_module": 176, "kexec_load": 246,
              "kexec_file_load": 320, "swapon": 167, "swapoff": 168, "acct": 163, "iopl": 172, "ioperm": 173,
              "settimeofday": 164, "clock_settime": 227, "vhangup": 153,
              "syslog": 103, "sethostname": 170, "setdomainname": 171, "quotactl": 179, "quotactl_fd": 443,
              "open_by_handle_at": 304, "lsm_get_self_attr": 459, "lsm_set_self_attr": 460,
              "lsm_list_modules": 461}
# aarch64: the generic table (no open, creat, chmod, mknod, inotify_init, modify_ldt, iopl, ioperm nor the old
# x86-only calls).
_ENOSYS_ARM = {"add_key": 217, "request_key": 218, "keyctl": 219, "perf_event_open": 241, "bpf": 280,
               "userfaultfd": 282, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
               "inotify_init1": 26, "fanotify_init": 262, "openat2": 437, "clone3": 435, "memfd_secret": 447,
               "nfsservctl": 42, "lookup_dcookie": 18, "file_getattr": 468, "file_setattr": 469}
_EPERM_ARM = {"kcmp": 272, "pidfd_getfd": 438, "process_madvise": 440, "move_pages": 239, "migrate_pages": 238,
              "mbind": 235, "set_mempolicy": 237, "get_mempolicy": 236, "set_mempolicy_home_node": 450, "mount": 40,
              "umount2": 39, "pivot_root": 41, "chroot": 51, "unshare": 97, "setns": 268, "open_tree": 428,
              "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
              "open_tree_attr": 467, "reboot": 142, "init_module": 105, "finit_module": 273, "delete_module": 106,
              "kexec_load": 104, "kexec_file_load": 294, "swapon": 224, "swapoff": 225, "acct": 89,
              "settimeofday": 170, "clock_settime": 112, "vhangup": 58,
              "syslog": 116, "sethostname": 161, "setdomainname": 162, "quotactl": 60, "quotactl_fd": 443,
              "open_by_handle_at": 265, "lsm_get_self_attr": 459, "lsm_set_self_attr": 460, "lsm_list_modules": 461}
_ARCHES: dict[str, Table] = {
    "x86_64": Table(
        0xC000003E, _ENOSYS_X86, _EPERM_X86,
        {"open": (2, 2), "chmod": (90, 1), "fchmod": (91, 1), "creat": (85, 1), "mknod": (133, 1),
         "openat": (257, 3), "mknodat": (259, 2), "fchmodat": (268, 2), "fchmodat2": (452, 2)},
        fallocate=285, personality=135, socket=41, clone=56, tracing={"ptrace": 101, "process_vm_readv": 310,
                                                            "process_vm_writev": 311}, foreign=0x40000000,
    ),
    "aarch64": Table(
        0xC00000B7, _ENOSYS_ARM, _EPERM_ARM,
        {"mknodat": (33, 2), "fchmod": (52, 1), "fchmodat": (53, 2), "openat": (56, 3), "fchmodat2": (452, 2)},
        fallocate=47, personality=92, socket=198, clone=220, tracing={"ptrace": 117, "process_vm_readv": 270,
                                                           "process_vm_writev": 271}, foreign=None,
    ),
}
_MACHINES = {"x86_64": "x86_64", "amd64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def arch_name() -> str | None:
    """This machine's architecture as the filter knows it, or None where there is no filter for it."""
    return _MACHINES.get(platform.machine().lower())


def kernel_release() -> tuple[int, int]:
    """The running kernel's (major, minor); (0, 0) where it cannot be read."""
    match = re.match(r"(\d+)\.(\d+)", platform.release())
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


@functools.cache
def program(arch: str | None = None) -> bytes | None:
    """The filter as bwrap's ``--seccomp`` takes it (struct sock_filter[]), or None for an unknown arch."""
    arch = arch or arch_name()
    if arch not in _ARCHES:
        return None
    t = _ARCHES[arch]
    deny = RET_ERRNO | errno.ENOSYS
    out = [_ins(_LD_ABS, _ARCH), _ins(_JEQ, t.audit, 1, 0), _ins(_RET, deny), _ins(_LD_ABS, _NR)]
    if t.foreign is not None:
        out += [_ins(_JGE, t.foreign, 0, 1), _ins(_RET, deny)]
    refused = [*t.refused.values(), *(t.tracing.values() if kernel_release() < (4, 8) else ())]
    verdicts = {nr: deny for nr in t.absent.values()} | {nr: RET_ERRNO | errno.EPERM for nr in refused}
    for nr, verdict in sorted(verdicts.items()):
        out += [_ins(_JEQ, nr, 0, 1), _ins(_RET, verdict)]
    # Each checked call: if nr matches, load its mode or flags argument (its low word), refuse a forbidden bit, else
    # allow.
    checks = [(nr, arg, SETID_BITS, RET_ERRNO | errno.EPERM) for nr, arg in t.setid.values()]
    checks.append((t.fallocate, 1, FALLOC_FL_KEEP_SIZE, RET_ERRNO | errno.EOPNOTSUPP))
    checks.append((t.clone, 0, CLONE_NAMESPACES, RET_ERRNO | errno.EPERM))
    for nr, arg, bits, verdict in sorted(checks):
        out += [_ins(_JEQ, nr, 0, 4), _ins(_LD_ABS, _ARGS + 8 * arg), _ins(_JSET, bits, 0, 1),
                _ins(_RET, verdict), _ins(_RET, RET_ALLOW)]
    # personality: only the values of PERSONALITIES (its argument is an unsigned int: the low word).
    out += [_ins(_JEQ, t.personality, 0, 3 + len(PERSONALITIES)), _ins(_LD_ABS, _ARGS)]
    for i, value in enumerate(PERSONALITIES):
        out.append(_ins(_JEQ, value, len(PERSONALITIES) - i, 0))
    out += [_ins(_RET, RET_ERRNO | errno.EPERM), _ins(_RET, RET_ALLOW)]
    # socket: not AF_ALG (the kernel's crypto interface, a history of exploits) nor AF_VSOCK (the way to the
    # hypervisor's host, which no network namespace closes). socketpair is not limited: it reaches nothing outside.
    out += [_ins(_JEQ, t.socket, 0, 4), _ins(_LD_ABS, _ARGS), _ins(_JEQ, AF_ALG, 1, 0), _ins(_JEQ, AF_VSOCK, 0, 1),
            _ins(_RET, RET_ERRNO | errno.EAFNOSUPPORT)]
    out.append(_ins(_RET, RET_ALLOW))
    return b"".join(out)
