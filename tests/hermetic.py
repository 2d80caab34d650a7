"""The suite's walls: no test reads or writes the operator's own home, config, data dir or notification channels.

An operator who runs the test command on their own machine has a ``~/.config/agent-console/config.toml`` (notify
URLs, a shared store, a provider's key) and a data dir with their runs in ``jobs.db``. Every process of the suite
(the controller, each pytest-xdist worker, every command a test starts) runs with:

- ``HOME`` and the XDG folders (config, data, state, cache, runtime) in a temporary folder made for the session,
  so platformdirs, Apprise, libpq (``~/.pgpass``), kubectl's ``~/.kube/config`` and git find nothing of the
  operator's;
- every ``AGENT_CONSOLE_*`` variable removed (by prefix: a variable added to the settings later is covered too),
  with the data dir and config file pointed into that folder (tests/conftest.py's autouse fixture then gives each
  test its own);
- the providers' keys and base URLs (``OPENAI_*``, ``ANTHROPIC_*``), Apprise's own variables (``APPRISE_*``),
  libpq's (``PG*``), ``KUBECONFIG``, the proxies and the agents' sockets removed.

It is set in ``pytest_configure``, before collection, before any fixture (a module- or session-scoped one runs
before the per-test fixture) and before pytest-xdist starts its workers, which inherit it, as does every
subprocess a test starts with ``os.environ``.

The check: the controller takes a fingerprint of what the suite could write under the real home before anything
runs (agent-console's folders under each XDG base, the data dir and config the environment named, the credential
and settings files the code reads, and the names at the home's top level), and the run fails at its end, naming
each change, if it differs. Each process
also records any attempt to reach an address off this machine (an audit hook on connect/getaddrinfo): the run
fails naming them (tests talk to loopback servers only). tests/test_hermetic.py proves the walls hold by running
tests in a child pytest under a fake "real home" whose config notifies a loopback canary.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import shutil
import socket
import stat
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import platformdirs

APP_NAME = "agent-console"
# Set in the environment of every process of an isolated session: its temporary folder (a worker, or a pytest a
# test starts, finds it and stays inside). Not an AGENT_CONSOLE_ name: those are all removed.
MARK = "HERMETIC_TESTS_TOP"
REMOVED_PREFIXES = ("AGENT_CONSOLE_", "OPENAI_", "ANTHROPIC_", "APPRISE_", "PG", "XDG_", "OTEL_")
# The operator's other ways out: a kube config, git's global config, agents holding their keys, a session bus.
REMOVED = ("KUBECONFIG", "GIT_CONFIG_GLOBAL", "GIT_DIR", "GIT_WORK_TREE", "SSH_AUTH_SOCK", "GPG_AGENT_INFO",
           "DBUS_SESSION_BUS_ADDRESS")

XDG = {"XDG_CONFIG_HOME": ".config", "XDG_DATA_HOME": ".local/share", "XDG_STATE_HOME": ".local/state",
       "XDG_CACHE_HOME": ".cache"}
# Watched whole only up to this many entries (an operator's data dir may hold thousands of runs): past it, its top
# level and its store (jobs.db and its journal files) are watched, which is where a run registers.
MAX_WATCHED = 5_000
NETWORK_LOG = "network.log"


def removed(name: str) -> bool:
    """Whether the variable ``name`` may name something of the operator's: it is not passed on."""
    # A proxy too (http_proxy, HTTPS_PROXY...): a test's request to its loopback server must not leave through it.
    return name.startswith(REMOVED_PREFIXES) or name in REMOVED or "proxy" in name.lower()


def lay_out(top: Path) -> Path:
    """A home of its own in ``top`` (its XDG folders, and a git identity: a test that commits must not need the
    operator's ~/.gitconfig), a runtime dir (0700, as XDG asks), an empty config file (AGENT_CONSOLE_CONFIG naming
    a missing file is an error). Returns ``top``."""
    home = top / "home"
    for rel in XDG.values():
        (home / rel).mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").write_text("[user]\n\tname = agent-console tests\n\temail = tests@localhost\n")
    (top / "runtime").mkdir(mode=0o700, exist_ok=True)
    (top / "config.toml").write_text("")
    return top


def pointed(top: Path) -> dict[str, str]:
    """The variables that point home, the XDG folders, the data dir and the config into ``top`` (laid out)."""
    home = top / "home"
    return {"HOME": str(home), **{name: str(home / rel) for name, rel in XDG.items()},
            "XDG_RUNTIME_DIR": str(top / "runtime"), "AGENT_CONSOLE_DATA_DIR": str(top / "data"),
            "AGENT_CONSOLE_CONFIG": str(top / "config.toml")}


def enter(env: os._Environ[str]) -> Path:
    """Point this process's environment (and so every process it starts) into a new temporary folder."""
    top = lay_out(Path(tempfile.mkdtemp(prefix="agent-console-hermetic-")))
    (top / NETWORK_LOG).write_text("")
    for name in [n for n in env if removed(n)]:
        del env[name]
    env.update(pointed(top))
    env[MARK] = str(top)
    return top


# -- the check -------------------------------------------------------------------------------------------------

@dataclass
class Watched:
    """What the suite could change under the real home, as (path -> fingerprint) taken before and after."""

    home: Path
    folders: list[Path] = field(default_factory=list)  # watched whole (bounded)
    files: list[Path] = field(default_factory=list)  # the config file, the store

    def fingerprint(self) -> dict[str, str]:
        found: dict[str, str] = {}
        # The home's top level: its names (an entry made or removed), not what changes inside them (another
        # program writes ~/.cache or a shell's history at any time); what agent-console writes is watched below.
        try:
            entries = list(os.scandir(self.home))
        except OSError:
            entries = []
        for entry in entries:
            found[entry.path] = "present"
        for folder in self.folders:
            found.update(_tree_print(folder))
        for path in self.files:
            found[str(path)] = _file_print(path)
        return found


def _file_print(path: Path) -> str:
    try:
        st = path.lstat()
    except FileNotFoundError:
        return "absent"
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    return f"{stat.filemode(st.st_mode)} {st.st_size} bytes, modified {st.st_mtime_ns}"


def _tree_print(folder: Path) -> dict[str, str]:
    found = {str(folder): _file_print(folder)}
    count = 0
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            count += 1
            path = Path(dirpath) / name
            found[str(path)] = _file_print(path)
        if count > MAX_WATCHED:  # bounded: the top level and the store stay watched
            found = {k: v for k, v in found.items() if Path(k).parent == folder}
            for path in folder.glob("jobs.db*"):
                found[str(path)] = _file_print(path)
            break
    return found


def watch_real_home(env: os._Environ[str] | dict[str, str]) -> Watched:
    """What to watch, from the environment the suite was started in (before it is pointed away)."""
    home = Path(env.get("HOME") or os.path.expanduser("~"))
    folders = {Path(platformdirs.user_config_dir(APP_NAME)), Path(platformdirs.user_data_dir(APP_NAME)),
               Path(platformdirs.user_state_dir(APP_NAME)), Path(platformdirs.user_cache_dir(APP_NAME))}
    files: set[Path] = set()
    if env.get("AGENT_CONSOLE_DATA_DIR"):
        folders.add(Path(env["AGENT_CONSOLE_DATA_DIR"]).expanduser())
    if env.get("AGENT_CONSOLE_CONFIG"):
        files.add(Path(env["AGENT_CONSOLE_CONFIG"]).expanduser())
    # What else a test could write as the operator: the credentials and settings files the code reads.
    files.update(home / rel for rel in (".kube/config", ".pgpass", ".netrc", ".gitconfig", ".config/git/config"))
    return Watched(home=home, folders=sorted(folders), files=sorted(files))


def changes(before: dict[str, str], after: dict[str, str]) -> list[str]:
    out = []
    for path in sorted(before.keys() | after.keys()):
        was, now = before.get(path, "absent"), after.get(path, "absent")
        if was != now:
            out.append(f"{path}: {was} -> {now}")
    return out


# -- the network -------------------------------------------------------------------------------------------------

def _loopback(host: object) -> bool:
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    if not isinstance(host, str):
        return True  # not an internet address (a unix socket's path is a str, checked by its family below)
    if host in ("localhost", "", socket.gethostname()) or host.endswith(".localhost"):
        return True  # (this machine's own name is in /etc/hosts)
    try:
        address = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False  # a name: resolving it already asks a server off this machine
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback or address.is_unspecified  # 0.0.0.0 and :: reach this machine


def watch_network(top: Path) -> None:
    """Record (in ``top``'s network log, shared by the processes of the session) every attempt of this process to
    reach an address that is not loopback: a test that would reach a real channel on a machine with a network."""
    log = top / NETWORK_LOG

    def hook(event: str, args: tuple[object, ...]) -> None:
        if event == "socket.getaddrinfo":
            host = args[0]
        elif event in ("socket.connect", "socket.sendto"):
            sock, address = args[0], args[1]
            if getattr(sock, "family", None) not in (socket.AF_INET, socket.AF_INET6) or not isinstance(address,
                                                                                                           tuple):
                return
            host = address[0]
        else:
            return
        if _loopback(host):
            return
        test = os.environ.get("PYTEST_CURRENT_TEST", "(outside a test)").rsplit(" (", 1)[0]
        try:
            with open(log, "a", encoding="utf-8") as f:
                f.write(f"{test}: {event} {host!r}\n")
        except OSError:
            pass

    sys.addaudithook(hook)


def network_attempts(top: Path) -> list[str]:
    try:
        lines = (top / NETWORK_LOG).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    return sorted(set(lines))


def tree_digest(root: Path) -> dict[str, str]:
    """Every entry under ``root`` with its kind, mode and (for a file) content hash: byte-for-byte comparison."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            path = Path(dirpath) / name
            st = path.lstat()
            what = stat.filemode(st.st_mode)
            if stat.S_ISREG(st.st_mode):
                what += " " + hashlib.sha256(path.read_bytes()).hexdigest()
            elif stat.S_ISLNK(st.st_mode):
                what += " -> " + os.readlink(path)
            out[str(path.relative_to(root))] = what
    return out


def remove_top(top: Path) -> None:
    shutil.rmtree(top, ignore_errors=True)
