"""A job's [sandbox] request over the operator's cap names the key, the cap and where the cap comes from (a config
file that may not exist: the default, the machine's memory for memory_mb)."""

from __future__ import annotations

import os

import pytest

from console.engine.tools.limits import SandboxCaps, SandboxSection, WorldError, resolve_world


def test_a_request_over_the_cap_says_where_the_cap_is_set() -> None:
    caps = SandboxCaps()
    with pytest.raises(WorldError) as info:
        resolve_world(SandboxSection(memory_mb=caps.memory_mb + 1), caps, max_job_mb=100)
    said = str(info.value)
    assert said.startswith(f"key 'sandbox.memory_mb': {caps.memory_mb + 1} is over the operator's limit of "
                           f"{caps.memory_mb} MB (memory_mb under [sandbox_limits] in the config file sets it; "
                           "without it, the default)")


# -- issue 32: the default caps grant nothing of the operator's home, /etc or the network -----------------------------
def _world(paths: list[str], caps: SandboxCaps, home: str, **kw: object):
    return resolve_world(SandboxSection(read_only=paths), caps, max_job_mb=100, home=home, homes=(home,), **kw)


def test_by_default_a_job_gets_no_network_and_no_path_of_the_home_or_etc(tmp_path) -> None:
    """Found: with no [sandbox_limits], a job asking read_only = ["~", "/etc"] and network = true got both."""
    home = str(tmp_path / "op")
    os.makedirs(f"{home}/.cargo")
    caps = SandboxCaps()
    with pytest.raises(WorldError) as info:
        resolve_world(SandboxSection(network=True), caps, max_job_mb=100, home=home)
    assert str(info.value) == ("key 'sandbox.network': the operator's config does not give jobs the network; to "
                               "allow it, set network = true under [sandbox_limits] in the config file")
    for asked, said in (("~", "'~' is your home folder"), ("~/.cargo", "'~/.cargo' is inside your home folder"),
                        ("/etc", "'/etc' is the host's /etc"), ("/etc/ssl", "'/etc/ssl' is inside the host's /etc"),
                        ("/home", "'/home' is the host's /home"), ("/var/lib", "'/var/lib' is inside the host's /var"),
                        ("/", "'/' holds the kernel's /proc, which commands never see"),
                        ("/proc/1", "'/proc/1' is inside the kernel's /proc")):
        if not os.path.exists(asked.replace("~", home)):
            continue
        with pytest.raises(WorldError) as info:
            _world(["/usr/share", asked], caps, home)
        text = str(info.value)
        assert text.startswith(f"key 'sandbox.read_only.1': {said}"), text
        if "never see" not in text:
            assert ("which jobs may not read by default; to allow it, list it in read_only under [sandbox_limits] in "
                    f"the config file (read_only = [\"{asked}\"], or true for any path)") in text
    # Outside the home and the host's private folders (a toolchain in /opt, /usr/share): granted.
    assert _world(["/usr/share"], caps, home).read_only == (os.path.realpath("/usr/share"),)


def test_the_operator_may_allow_any_path_or_the_paths_of_a_list(tmp_path) -> None:
    home = str(tmp_path / "op")
    os.makedirs(f"{home}/.cargo/bin")
    os.makedirs(f"{home}/work")
    assert _world(["~"], SandboxCaps(read_only=True), home).read_only == (home,)
    listed = SandboxCaps(read_only=["~/.cargo"])
    assert _world(["~/.cargo/bin"], listed, home).read_only == (f"{home}/.cargo/bin",)
    with pytest.raises(WorldError) as info:
        _world(["~/work"], listed, home)
    assert str(info.value) == ("key 'sandbox.read_only.0': '~/work' is outside the folders the operator's config "
                               "allows jobs to read (~/.cargo); to allow it, add it to read_only under "
                               "[sandbox_limits] in the config file")
    with pytest.raises(WorldError) as info:
        _world(["~/work"], SandboxCaps(read_only=False), home)
    assert "sandbox_limits.read_only = false" in str(info.value)
    # Not even when allowed: the kernel's interfaces (the host's /proc shows the harness's environment).
    with pytest.raises(WorldError, match="'/proc' is the kernel's /proc, which commands never see"):
        _world(["/proc"], SandboxCaps(read_only=True), home)
    assert resolve_world(SandboxSection(network=True), SandboxCaps(network=True), max_job_mb=100).network


def test_credentials_in_an_allowed_path_are_hidden_and_never_an_extra_path(tmp_path) -> None:
    home = str(tmp_path / "op")
    for folder in (".ssh", ".aws", ".config/agent-console", "work"):
        os.makedirs(f"{home}/{folder}")
    for file in (".pgpass", ".netrc", ".ssh/id_rsa"):
        open(f"{home}/{file}", "w").close()
    caps = SandboxCaps(read_only=True)
    world = _world(["~"], caps, home, hide=(f"{home}/.config/agent-console",))
    for name in (".ssh", ".gnupg", ".aws", ".kube", ".docker", ".config", ".pgpass", ".netrc"):
        assert f"{home}/{name}" in world.hide, name
    assert f"{home}/.config/agent-console" in world.hide
    for asked in ("~/.ssh", "~/.ssh/id_rsa", "~/.pgpass", "~/.config/agent-console"):
        with pytest.raises(WorldError, match="which commands never see"):
            _world([asked], caps, home)
    # A folder of its own (no home in it) hides nothing of the home.
    assert not [h for h in _world(["~/work"], caps, home).hide if h.startswith(home)]


def test_a_socket_is_never_an_extra_path(tmp_path) -> None:
    import socket

    path = str(tmp_path / "daemon.sock")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(path)
        with pytest.raises(WorldError, match="is neither a folder nor a regular file"):
            _world([path], SandboxCaps(read_only=True), str(tmp_path / "op"))


def test_a_folder_with_a_mount_inside_is_refused_as_an_extra_path(tmp_path, monkeypatch) -> None:
    """Its overlay (the way no socket in it can be reached) cannot be made over another file system mounted inside
    it (overlayfs refuses it in a user namespace): said at the start, not as a failure of every call."""
    from console.engine.tools import limits

    table = tmp_path / "mountinfo"
    table.write_text("22 1 0:21 / / rw - ext4 /dev/vda rw\n"
                     "30 22 0:25 / /srv/data\\040set rw - tmpfs none rw\n"
                     "31 22 0:26 / /srv rw - ext4 /dev/vdb rw\n"
                     "32 31 0:27 / /srvx rw - tmpfs none rw\n")
    assert limits.mounts_below("/srv", str(table)) == ["/srv/data set"]
    assert limits.mounts_below("/srv/data set", str(table)) == []
    shared = tmp_path / "shared"
    shared.mkdir()
    monkeypatch.setattr(limits, "mounts_below", lambda folder: [f"{folder}/nfs"])
    with pytest.raises(WorldError) as info:
        _world([str(shared)], SandboxCaps(read_only=True), str(tmp_path / "op"))
    assert str(info.value) == (f"key 'sandbox.read_only.0': '{shared}' has a file system mounted inside it "
                               f"({shared}/nfs), which its read-only overlay cannot show; name folders without one "
                               "(a mounted folder itself may be one)")
