"""What a job-declared command sees and how far it can go: each attack of issue 17, played by a real command.

The world (a filesystem made for the command: nothing of the operator's), and the bounds (processes, memory,
/tmp and /dev/shm, the job folder's size, CPU, file size, open files, and a tree that ends whole). Each test
states the attack it replays; each one failed against the harness before this world and these bounds.
"""

from __future__ import annotations

import os
import re
import socket
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from console.engine.runtime import Runtime
from console.engine.tools.cgroups import find_cgroups
from console.engine.tools.confine import Bwrap
from console.engine.tools.limits import CommandLimits, CommandWorld
from tests.commands_support import CONFINED, UNCONFINED, alive, call, my_children, py

pytestmark = pytest.mark.usefixtures("bwrap")

SMALL = CommandLimits(processes=48, memory_mb=192, cpu_seconds=2, open_files=64, file_size_mb=4, tmp_mb=8, shm_mb=8)


def bounded(world: CommandWorld = CONFINED, **limits: int) -> CommandWorld:
    return replace(world, limits=replace(SMALL, **limits))


def lines(out) -> list[str]:
    return out.content.splitlines()[1:]


# -- what a command sees -------------------------------------------------------------------------------------------
def test_a_command_sees_its_job_and_the_toolchain_and_nothing_of_the_operators(make_rt, tmp_path: Path) -> None:
    """Found: a command read the operator's ~/.ssh, the config file with the API key, every other run's journal,
    the data dir's jobs.db, and /etc/shadow as root."""
    operator_home = tmp_path / "home" / "op"
    (operator_home / ".ssh").mkdir(parents=True)
    (operator_home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY")
    (operator_home / ".config" / "agent-console").mkdir(parents=True)
    (operator_home / ".config" / "agent-console" / "config.toml").write_text('openai_api_key = "sk-live"')
    data = operator_home / ".local" / "share" / "agent-console"
    other = data / "runs" / "other-run" / ".console"
    other.mkdir(parents=True)
    (other / "checkpoint.jsonl").write_text("{}")
    (data / "jobs.db").write_text("db")
    rt = make_rt(root=data / "runs" / "this-run")
    paths = [str(operator_home / ".ssh" / "id_ed25519"), str(operator_home / ".config" / "agent-console"),
             str(other / "checkpoint.jsonl"), str(data / "jobs.db"), "/etc/shadow", "/root", "/home", "/var",
             "/srv", "/mnt", "/media", "/run", "/opt", "/boot", "/sys/kernel", "/etc/pip.conf", "/etc/gitconfig"]
    # The default world (the tests' Python is not added to it: sh and the toolchain are enough).
    out = call(rt, ["sh", "-c", 'for p in "$@"; do [ -e "$p" ] && echo "SEEN $p"; done; ls /; echo; ls /etc',
                    "sh", *paths], CommandWorld())
    assert out.ok, out.content
    assert "SEEN" not in out.content
    top, _, etc = out.content.split("\n", 1)[1].partition("\n\n")
    assert set(top.split()) <= {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "tmp", "usr"}
    assert "shadow" not in etc.split() and "passwd" in etc.split()
    # Its own folder is there, read-write.
    assert call(rt, ["sh", "-c", "echo x > mine && cat mine"], CommandWorld()).content == "exit code 0\nx"


def test_the_root_dev_and_etc_are_read_only_and_home_is_empty(rt: Runtime) -> None:
    code = ('for p in /x /etc/x /dev/x /usr/x; do touch "$p" 2>/dev/null && echo "WROTE $p"; done; '
            'ls -A "$HOME" | wc -l; echo "$HOME"; touch "$HOME/.cache" && echo home-writable; '
            'unshare -U true 2>/dev/null && echo NESTED-USERNS; echo done')
    out = call(rt, ["sh", "-c", code], CONFINED)
    assert "WROTE" not in out.content and "NESTED-USERNS" not in out.content
    assert lines(out) == ["0", "/tmp/home", "home-writable", "done"]


def test_extra_read_only_paths_are_read_only_and_hide_the_data_dir(make_rt, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    (shared / "sdk").mkdir(parents=True)
    (shared / "sdk" / "tool.txt").write_text("sdk\n")
    data = shared / "agent-console-data"
    (data / "runs" / "another" / ".console").mkdir(parents=True)
    (data / "jobs.db").write_text("db")
    rt = make_rt(root=data / "runs" / "mine")
    world = replace(CONFINED, read_only=(*CONFINED.read_only, str(shared)), hide=(str(data),))
    code = (f'cat {shared}/sdk/tool.txt; touch {shared}/sdk/new 2>/dev/null || echo ro; '
            f'ls -A {data}; ls -A {data}/runs; echo x > here && echo job-rw')
    out = call(rt, ["sh", "-c", code], world)
    # the SDK reads, cannot be written; the data dir shows only the path down to this run
    assert lines(out) == ["sdk", "ro", "runs", "mine", "job-rw"], out.content


def test_host_unix_sockets_are_out_of_reach(rt: Runtime, tmp_path: Path) -> None:
    """Found: host unix sockets outside /tmp and /run were connectable ("no network" only removed IP)."""
    folder = tmp_path / "sockets"
    folder.mkdir()
    path = str(folder / "daemon.sock")
    abstract = f"\0agent-console-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX) as named, socket.socket(socket.AF_UNIX) as hidden:
        named.bind(path)
        named.listen(1)
        hidden.bind(abstract)
        hidden.listen(1)
        code = ("import socket, sys\n"
                "for target in sys.argv[1:]:\n"
                "    s = socket.socket(socket.AF_UNIX)\n"
                "    try:\n"
                "        s.connect(target.replace('@', chr(0), 1)); print('CONNECTED', repr(target))\n"
                "    except OSError as e: print('refused', e.errno)\n")
        out = call(rt, py(code, path, "@" + abstract[1:]), CONFINED)
        assert out.ok and "CONNECTED" not in out.content, out.content
        free = call(rt, py(code, path, "@" + abstract[1:]), UNCONFINED)  # the test can fail: unconfined connects
        assert free.content.count("CONNECTED") == 2


# -- bounds -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("world", [CONFINED, UNCONFINED], ids=["confined", "unconfined"])
def test_a_fork_bomb_is_bounded(rt: Runtime, world: CommandWorld) -> None:
    """Found: a command forked without bound."""
    if world.unconfined and find_cgroups() is None and os.geteuid() == 0:
        pytest.skip("unconfined as root without a cgroup: RLIMIT_NPROC does not apply to root (documented)")
    code = "i=0; while [ $i -lt 400 ]; do sleep 30 & i=$((i+1)); done; echo spawned; wait"
    started = time.monotonic()
    out = call(rt, ["sh", "-c", code], bounded(world), timeout=20)
    assert time.monotonic() - started < 15
    assert "spawned" not in out.content and "fork" in out.content.lower(), out.content
    assert my_children() == []


@pytest.mark.parametrize("where, key", [("/tmp", "tmp_mb"), ("/dev/shm", "shm_mb")])
def test_tmp_and_shm_are_private_and_small(rt: Runtime, where: str, key: str) -> None:
    """Found: a command filled /tmp and /dev/shm (host RAM)."""
    out = call(rt, ["sh", "-c", f"dd if=/dev/zero of={where}/fill bs=1M count=64 2>&1; ls {where}"],
               bounded(**{key: 8, "file_size_mb": 1024}))
    assert "No space left on device" in out.content, out.content
    assert not os.path.exists(f"{where}/fill") or os.path.getsize(f"{where}/fill") < 8 * 2**20


@pytest.mark.parametrize("world", [CONFINED, UNCONFINED], ids=["confined", "unconfined"])
def test_memory_is_bounded(rt: Runtime, world: CommandWorld) -> None:
    out = call(rt, py("b = bytearray(1 << 30); print('allocated')"), bounded(world, memory_mb=128))
    assert not out.ok and "allocated" not in out.content
    assert "memory limit of 128 MB" in out.content or "MemoryError" in out.content, out.content


@pytest.mark.parametrize("world", [CONFINED, UNCONFINED], ids=["confined", "unconfined"])
def test_a_command_that_grows_the_job_folder_past_max_job_mb_is_stopped(rt: Runtime, world: CommandWorld) -> None:
    """Found: a command grew the job folder past max_job_mb (the limit covered only the file tools)."""
    code = ("i=0; while [ $i -lt 200 ]; do dd if=/dev/zero of=blob$i bs=1M count=1 2>/dev/null; i=$((i+1)); "
            "sleep 0.02; done")
    out = call(rt, ["sh", "-c", code], replace(bounded(world), max_job_mb=20), timeout=30)
    assert not out.ok
    assert out.content.startswith("stopped: the job folder grew to"), out.content
    assert "past its limit of 20 MB (max_job_mb)" in out.content
    assert len(list(rt.paths.root.glob("blob*"))) < 60
    # The file tools' running total knows the folder is full now.
    assert rt.sandbox is not None and rt.sandbox.job_bytes() > 20 * 2**20


def test_a_quick_command_that_overfills_the_folder_is_told(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    # "Quick": done before the watch's first look. Made so whatever the machine's load (found in CI: beside busy
    # processes the 30 MB took longer than WATCH_AFTER, and the watch stopped it first), by a watch that never starts.
    monkeypatch.setattr("console.engine.tools.process.WATCH_AFTER", 3600.0)
    out = call(rt, ["sh", "-c", "dd if=/dev/zero of=big bs=1M count=30 2>/dev/null; echo wrote"],
               replace(bounded(file_size_mb=64), max_job_mb=20))
    assert "wrote" in out.content
    assert "past its limit of 20 MB (max_job_mb): the call failed" in out.content
    assert not out.ok  # fail closed: exit code 0, and the folder past its limit (found: it said ok)


def test_cpu_file_size_and_open_files_are_bounded(rt: Runtime) -> None:
    spin = call(rt, ["sh", "-c", "while :; do :; done"], bounded(cpu_seconds=1), timeout=20)
    assert spin.content.startswith("killed: a process went over its CPU time limit of 1 s"), spin.content
    big = call(rt, ["sh", "-c", "dd if=/dev/zero of=f bs=1M count=16"], bounded(file_size_mb=2))
    assert big.content.startswith("killed: it wrote a file larger than its limit of 2.0 MB"), big.content
    files = call(rt, py("import os\nn = 0\ntry:\n    while True: os.open('/dev/null', 0); n += 1\n"
                        "except OSError as e: print('stopped at', n, e.errno)"), bounded(open_files=64))
    assert files.ok and int(lines(files)[0].split()[2]) < 64


@pytest.mark.parametrize("world", [CONFINED, UNCONFINED], ids=["confined", "unconfined"])
def test_a_setsid_double_fork_ends_at_the_timeout(rt: Runtime, world: CommandWorld) -> None:
    """Found: unconfined, a setsid grandchild outlived the timeout and the run."""
    marker = f"31.{uuid.uuid4().int % 10**6:06d}"
    code = f"(setsid sh -c 'sleep {marker}' &) ; sleep 30"
    try:
        out = call(rt, ["sh", "-c", code], world, timeout=0.5)
        assert out.content.startswith("timed out after 0.5 s (killed)")
        deadline = time.monotonic() + 2
        while alive(marker) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert alive(marker) == []
        assert my_children() == []
    finally:
        for pid in alive(marker):
            os.kill(pid, 9)


def test_the_cgroup_of_a_call_is_gone_after_it(rt: Runtime, bwrap: Bwrap) -> None:
    cg = find_cgroups()
    if cg is None:
        pytest.skip("no cgroup can be made here (bounds are rlimits)")
    before = {p.name for p in cg.memory.iterdir() if p.name.startswith("agent-console-")}
    call(rt, ["sh", "-c", "sleep 30 & echo x"], CONFINED, timeout=0.3)
    after = {p.name for p in cg.memory.iterdir() if p.name.startswith("agent-console-")}
    assert after <= before


def test_rlimit_nproc_counts_only_what_the_command_adds() -> None:
    """RLIMIT_NPROC counts every task of the user: inside bwrap's user namespace only the command's own (the limit
    is the bound itself); elsewhere the user's tasks now are added, so an operator's busy desktop never leaves a
    command unable to fork; root is not bound by it at all (the pids cgroup or the pid namespace is)."""
    from console.engine.tools.process import Launch, _nproc_base, rlimits, user_tasks

    assert _nproc_base(Launch("bwrap", ["--unshare-all", "--unshare-user"])) == 0
    mine = user_tasks(os.getuid())
    assert mine >= threading_count()
    base = _nproc_base(Launch())
    assert base is None if os.geteuid() == 0 else base >= mine - 50
    limits = dict((r, (soft, hard)) for r, soft, hard in rlimits(SMALL, nproc_base=100))
    import resource

    assert limits[resource.RLIMIT_NPROC] == (100 + SMALL.processes,) * 2
    assert resource.RLIMIT_NPROC not in dict((r, 0) for r, _s, _h in rlimits(SMALL, nproc_base=None))
    assert limits[resource.RLIMIT_CPU] == (SMALL.cpu_seconds, SMALL.cpu_seconds + 5)  # SIGXCPU first, then SIGKILL


def threading_count() -> int:
    import threading

    return threading.active_count()


# -- the red team's findings (each replayed as it was found) ----------------------------------------------------------
def test_a_root_operators_command_cannot_write_a_sysctl_or_read_the_kernels_secrets(rt: Runtime) -> None:
    """Found: as root (uid 0 inside maps to the host's 0), /proc/sys checks the uid, not a capability: a command
    set kernel.core_pattern to a pipe and the kernel ran its script as host root. The write below puts back the
    value the sysctl already has, so the host is unchanged even if the sandbox failed."""
    code = ('v=$(cat /proc/sys/vm/stat_interval); echo "$v" > /proc/sys/vm/stat_interval 2>/dev/null && echo WROTE;'
            ' echo 1000 > /proc/self/oom_score_adj 2>/dev/null && echo WROTE-PROC;'
            ' for f in /proc/keys /proc/kcore /proc/cmdline /proc/timer_list; do [ -s "$f" ] && echo "READ $f"; done;'
            ' echo checked')
    out = call(rt, ["sh", "-c", code], CommandWorld())
    assert lines(out) == ["sh: 1: cannot create /proc/sys/vm/stat_interval: Read-only file system",
                          "sh: 1: cannot create /proc/self/oom_score_adj: Read-only file system", "checked"]


@pytest.mark.skipif(__import__("platform").machine() not in ("x86_64", "aarch64"), reason="no filter for this arch")
def test_the_keyrings_and_exploit_prone_calls_are_refused(rt: Runtime) -> None:
    """Found: /proc/keys listed the host root's keys; keyrings are keyed by uid, so a root operator's command
    could reach them (add, link, search). The seccomp filter refuses the keyring calls (ENOSYS)."""
    code = ("import ctypes, os, platform\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "nr = {'x86_64': {'add_key': 248, 'keyctl': 250, 'bpf': 321, 'userfaultfd': 323},\n"
            "      'aarch64': {'add_key': 217, 'keyctl': 219, 'bpf': 280, 'userfaultfd': 282}}[platform.machine()]\n"
            "for name, n in sorted(nr.items()):\n"
            "    r = libc.syscall(n, b'user', b'k', b'v', 1, -3) if name == 'add_key' else libc.syscall(n, 0, 0, 0)\n"
            "    print(name, r, os.strerror(ctypes.get_errno()))\n")
    out = call(rt, py(code), CONFINED)
    assert lines(out) == [f"{n} -1 Function not implemented" for n in ("add_key", "bpf", "keyctl", "userfaultfd")]
    # Blocks past a file's end escape RLIMIT_FSIZE: fallocate --keep-size is refused (a plain one is bounded).
    keep = call(rt, ["sh", "-c", ": > big; fallocate -n -l 3G big; fallocate -l 3G big2; ls -s big big2 | sort"],
                replace(CONFINED, limits=replace(SMALL, file_size_mb=4)))
    assert "keep size mode is unsupported" in keep.content and "File size limit exceeded" in keep.content
    assert lines(keep)[-2:] == ["0 big", "0 big2"], keep.content


def test_a_command_can_make_no_setuid_file_and_none_is_left(rt: Runtime) -> None:
    """Found: `cp /usr/bin/python3 ./py && chmod 4755 ./py` left a setuid-root python in the job folder, which
    another user of the host ran as root. chmod and creating a file with the bit are refused; anything that
    still carries one (a file made by other means) loses it after the call."""
    code = ("import os, stat\n"
            "open('py', 'wb').write(b'x')\n"
            "for label, fn in (('chmod', lambda: os.chmod('py', 0o4755)), ('sgid', lambda: os.chmod('py', 0o2755)),\n"
            "                  ('create', lambda: os.close(os.open('made', os.O_CREAT | os.O_WRONLY, 0o4755)))):\n"
            "    try:\n"
            "        fn(); print(label, 'DONE')\n"
            "    except OSError as e: print(label, e.strerror)\n"
            "os.chmod('py', 0o755); print('plain chmod ok')\n")
    out = call(rt, py(code), CONFINED)
    assert lines(out) == ["chmod Operation not permitted", "sgid Operation not permitted",
                          "create Operation not permitted", "plain chmod ok"], out.content
    for path in rt.paths.root.rglob("*"):
        assert not path.lstat().st_mode & 0o6000, path


def test_setuid_bits_left_by_an_unconfined_command_are_removed(rt: Runtime) -> None:
    out = call(rt, ["sh", "-c", "echo x > tool && chmod 4755 tool && mkdir -p d && echo y > d/g && chmod 2755 d/g"],
               UNCONFINED)
    assert "the setuid/setgid bit was removed from tool, d/g" in out.content, out.content
    assert not (rt.paths.root / "tool").stat().st_mode & 0o6000
    assert not (rt.paths.root / "d" / "g").stat().st_mode & 0o6000


@pytest.mark.parametrize("program, what", [
    # fallocate --keep-size: size 0, all blocks (RLIMIT_FSIZE does not apply).
    ("fallocate -n -l 40M big 2>/dev/null || python3 -c \"import os; f = os.open('big', os.O_CREAT | os.O_WRONLY); "
     "os.posix_fallocate(f, 0, 40 << 20)\"", "blocks"),
    # a folder named like the harness folder in another case is the agent's, not the harness's
    ("mkdir .CONSOLE && dd if=/dev/zero of=.CONSOLE/f bs=1M count=40 2>/dev/null", "look-alike"),
    # 15,000 empty files: inodes, not bytes (each counts 512 bytes: 7.3 MB, against a limit of 5 MB here)
    ("python3 -c \"import os\nfor i in range(15000): os.close(os.open(f'f{i}', os.O_CREAT | os.O_WRONLY))\"",
     "entries"),
])
def test_every_way_of_filling_the_folder_counts(rt: Runtime, program: str, what: str) -> None:
    """Found: max_job_mb was bypassed by fallocate --keep-size, by a folder named .CONSOLE (skipped as if it were
    the harness folder), by inodes (empty files, links, folders)."""
    limit = 5 if what == "entries" else 20
    world = replace(CONFINED, max_job_mb=limit)
    out = call(rt, ["sh", "-c", program], world, timeout=60)
    assert re.search(rf"past its limit of {limit}(\.0)? MB \(max_job_mb\)", out.content), (what, out.content)
    assert not out.ok, (what, out.content)


def test_a_folder_too_wide_for_the_harnesss_descriptors_still_counts(rt: Runtime) -> None:
    """Found: the measure opened a descriptor per folder it meant to visit; 3,000 folders under a harness with the
    usual 1,024 descriptors made it skip the rest (and the bytes in them)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
    try:
        code = ("python3 -c \"import os\nfor i in range(3000): os.mkdir(f'd{i:04d}')\"; "
                "for i in 2990 2991 2992 2993 2994 2995 2996 2997 2998 2999; do "
                "dd if=/dev/zero of=d$i/blob bs=1M count=3 2>/dev/null; done; echo wrote")
        out = call(rt, ["sh", "-c", code], replace(CONFINED, max_job_mb=20), timeout=60)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert "past its limit of 20 MB (max_job_mb)" in out.content, out.content


def test_a_command_is_stopped_when_the_hosts_open_file_table_is_nearly_full(rt: Runtime, monkeypatch) -> None:
    """Found: 330 processes with 8,000 files each filled the host's table (fs.file-nr 2,466,165 of 2,466,170): the
    defaults allowed more than it holds. Now processes x open files stays within it, and a command is stopped
    while the table is over 90% full. (The table is faked here: the test must not fill the real one.)"""
    from console.engine.tools import limits, process

    assert limits.default_processes() * limits.OPEN_FILES <= (limits.file_max() or 1 << 62)
    full = {"now": False}
    real = process.host_files_nearly_full
    monkeypatch.setattr(process, "host_files_nearly_full", lambda: (95, 100) if full["now"] else real())
    started = time.monotonic()
    rt.should_stop = lambda: full.update(now=time.monotonic() - started > 0.3) or False
    out = call(rt, ["sleep", "30"], CONFINED)
    assert time.monotonic() - started < 5
    assert out.content.startswith("stopped: the host's table of open files was nearly full (95 of 100)")


# -- issue 32: what an extra path the operator allows still hides, and the calls the filter refuses ---------------
def test_credentials_inside_an_allowed_home_stay_hidden(make_rt, tmp_path: Path) -> None:
    """Found: a job asking read_only = ["~"] read ~/.ssh/id_rsa and ~/.pgpass (the store's password). Now, even where
    the operator allows any path, the credentials of every home folder in an extra path are covered (the operator's
    and another user's under a folder of homes), and what else is there still reads."""
    from console.engine.tools.limits import SandboxCaps, SandboxSection, resolve_world

    op, alice = tmp_path / "op", tmp_path / "users" / "alice"
    secrets = {".ssh/id_rsa": "OP-SSH-KEY", ".pgpass": "db:5432:*:agents:OP-PG-PASSWORD", ".netrc": "OP-NETRC",
               ".aws/credentials": "OP-AWS", ".config/gh/hosts.yml": "OP-GH-TOKEN", ".kube/config": "OP-KUBE",
               ".docker/config.json": "OP-DOCKER", ".gnupg/private-keys-v1.d/k.key": "OP-GPG"}
    for rel, text in secrets.items():
        (op / rel).parent.mkdir(parents=True, exist_ok=True)
        (op / rel).write_text(text)
    (op / "notes.txt").write_text("plain notes\n")
    (alice / ".ssh").mkdir(parents=True)
    (alice / ".ssh" / "id_ed25519").write_text("ALICE-SSH-KEY")
    rt = make_rt()
    world = resolve_world(SandboxSection(read_only=["~", str(tmp_path / "users")]), SandboxCaps(read_only=True),
                          max_job_mb=100, home=str(op), homes=(str(op), str(alice)))
    targets = [*(str(op / rel) for rel in secrets), str(alice / ".ssh" / "id_ed25519")]
    code = ('for f in "$@"; do cat "$f" 2>/dev/null; done; echo; ls -A "$0/.ssh" "$0/.config" | tr "\\n" " "; echo; '
            'cat "$0/notes.txt"')
    out = call(rt, ["sh", "-c", code, str(op), *targets], world)
    assert out.ok, out.content
    assert "OP-" not in out.content and "ALICE" not in out.content, out.content
    assert lines(out)[-1] == "plain notes" and sorted(lines(out)[-2].split()) == [f"{op}/.config:", f"{op}/.ssh:"]


def test_a_socket_in_an_allowed_path_cannot_be_reached(rt: Runtime, tmp_path: Path) -> None:
    """Found: a read-only bind does not stop connect(): a job given a folder with a host program's unix socket in it
    reached that program. The folder is an overlay: its files read, its sockets (made before or after the run
    started) are not the ones the host listens on."""
    shared = tmp_path / "shared"
    (shared / "run").mkdir(parents=True)
    (shared / "readme.txt").write_text("shared files\n")
    path = str(shared / "run" / "daemon.sock")
    code = ("import socket, sys\n"
            "print(open(sys.argv[2]).read().strip())\n"
            "s = socket.socket(socket.AF_UNIX)\n"
            "try:\n"
            "    s.connect(sys.argv[1]); print('CONNECTED')\n"
            "except OSError as e: print('refused', e.strerror)\n")
    world = replace(CONFINED, read_only=(*CONFINED.read_only, str(shared)))
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(path)
        server.listen(1)
        out = call(rt, py(code, path, str(shared / "readme.txt")), world)
        assert lines(out) == ["shared files", "refused Connection refused"], out.content
        assert call(rt, py(code, path, str(shared / "readme.txt")), UNCONFINED).content.endswith("CONNECTED")
    # Files keep their modes and owner through the overlay; the folder stays read-only.
    check = call(rt, ["sh", "-c", f'stat -c %a:%u "{shared}" "{shared}/readme.txt"; touch "{shared}/x" 2>&1 | wc -l'],
                 world)
    st, sf = os.stat(shared), os.stat(shared / "readme.txt")
    assert lines(check) == [f"{st.st_mode & 0o7777:o}:{st.st_uid}", f"{sf.st_mode & 0o7777:o}:{sf.st_uid}", "1"]


OPENAT2 = ("import ctypes, os\n"
           "class How(ctypes.Structure):\n"
           "    _fields_ = [('flags', ctypes.c_uint64), ('mode', ctypes.c_uint64), ('resolve', ctypes.c_uint64)]\n"
           "libc = ctypes.CDLL(None, use_errno=True)\n"
           "how = How(os.O_CREAT | os.O_WRONLY, 0o4755, 0)\n"
           "nr = {'x86_64': 437, 'aarch64': 437}[os.uname().machine]\n"
           "fd = libc.syscall(nr, -100, b'made', ctypes.byref(how), ctypes.sizeof(how))\n"
           "print('openat2', fd, os.strerror(ctypes.get_errno()) if fd < 0 else '')\n"
           "print(oct(os.stat('made').st_mode) if os.path.exists('made') else 'no file')\n"
           "open('plain', 'w').write('x'); print(open('plain').read())\n"
           "import subprocess; print(subprocess.run(['true']).returncode)\n")


@pytest.mark.skipif(__import__("platform").machine() not in ("x86_64", "aarch64"), reason="no filter for this arch")
def test_openat2_cannot_make_a_setuid_file(rt: Runtime) -> None:
    """Found: openat2 takes its mode in a struct the filter could not read: a command made a setuid-root file with it.
    It is refused (ENOSYS: callers fall back to openat, which the filter checks); open() and a child still work."""
    out = call(rt, py(OPENAT2), CONFINED)
    assert lines(out) == ["openat2 -1 Function not implemented", "no file", "x", "0"], out.content
    assert not (rt.paths.root / "made").exists()


# The system calls' numbers (the kernel's tables: arch/x86/entry/syscalls/syscall_64.tbl, include/uapi/asm-generic/
# unistd.h for aarch64).
SYSCALLS = {
    "x86_64": {"kcmp": 312, "move_pages": 279, "memfd_secret": 447, "personality": 135, "clone3": 435,
               "modify_ldt": 154},
    "aarch64": {"kcmp": 272, "move_pages": 239, "memfd_secret": 447, "personality": 92, "clone3": 435},
}
# (name, the call's Python, what it must say): each one Docker's default profile refuses, each one worked here before.
REFUSED_CALLS = [
    ("kcmp", "sc('kcmp', os.getpid(), os.getpid(), 0, 0, 0)", "Operation not permitted"),
    ("move_pages", "sc('move_pages', 0, 0, None, None, None, 0)", "Operation not permitted"),
    ("memfd_secret", "sc('memfd_secret', 0)", "Function not implemented"),
    ("personality", "sc('personality', 0x0040000)", "Operation not permitted"),  # ADDR_NO_RANDOMIZE
    ("vsock", "socket.socket(40, socket.SOCK_STREAM).close() or 0", "Address family not supported by protocol"),
    ("clone3", "sc('clone3', None, 0)", "Function not implemented"),
]
if __import__("platform").machine() == "x86_64":
    REFUSED_CALLS.append(("modify_ldt", "sc('modify_ldt', 0, ctypes.create_string_buffer(16), 16)",
                          "Operation not permitted"))


@pytest.mark.skipif(__import__("platform").machine() not in ("x86_64", "aarch64"), reason="no filter for this arch")
@pytest.mark.parametrize("name, expr, said", REFUSED_CALLS, ids=[c[0] for c in REFUSED_CALLS])
def test_the_calls_dockers_profile_refuses_are_refused(rt: Runtime, name: str, expr: str, said: str) -> None:
    """Found: commands could call modify_ldt, kcmp, move_pages, memfd_secret (and open a vsock to the hypervisor's
    host, which no network namespace closes)."""
    code = ("import ctypes, os, socket, sys\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            f"NR = {SYSCALLS[__import__('platform').machine()]!r}\n"
            "def sc(name, *args):\n"
            "    ctypes.set_errno(0)\n"
            "    r = libc.syscall(NR[name], *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])\n"
            "    if r < 0: raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))\n"
            "    return r\n"
            "try:\n"
            f"    print('ALLOWED', {expr})\n"
            "except OSError as e: print(e.strerror)\n")
    out = call(rt, py(code), CONFINED)
    assert lines(out) == [said], (name, out.content)


def test_a_setuid_file_at_any_depth_loses_its_bit(rt: Runtime) -> None:
    """Found: a setuid file 300 folders deep survived the sweep after a call (its walk stopped at 256 levels)."""
    deep = rt.paths.root
    for _ in range(300):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / "tool").write_bytes(b"#!/bin/sh\n")
    os.chmod(deep / "tool", 0o4755)  # made by other means than a confined command (which cannot)
    out = call(rt, ["true"], CONFINED)
    said = re.search(r"the setuid/setgid bit was removed from \.\.\.(/d)+/tool: files", out.content)
    assert out.ok and said, out.content
    assert not (deep / "tool").stat().st_mode & 0o6000
    # An unconfined command's, the same.
    out = call(rt, ["sh", "-c", 'cd "$1" && echo x > tool2 && chmod 4755 tool2', "sh", str(deep)], UNCONFINED)
    assert "the setuid/setgid bit was removed from" in out.content and not (deep / "tool2").stat().st_mode & 0o6000
