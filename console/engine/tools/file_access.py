"""What every file tool does first: the run's sandbox, the agent's path checked by it, a text file read whole,
and where the harness's tool docs show in a listing or a search."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from console.engine.sandbox import Sandbox, SandboxError
from console.engine.text import looks_binary
from console.engine.tools.registry import ToolFailure

if TYPE_CHECKING:
    from console.engine.runtime import Runtime


# The largest file read_file and edit_file take whole, and search_files looks into.
MAX_FILE_BYTES = 32 * 2**20


def sandbox(rt: Runtime) -> Sandbox:
    assert rt.sandbox is not None
    return rt.sandbox


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()


def stray_temp(rt: Runtime, data: bytes) -> None:
    """What a kill between writing a temp file and renaming it leaves (for the kill-point tests)."""
    tmp = rt.paths.state / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / ".killed-mid-write.tmp").write_bytes(data[: len(data) // 2])


def checked(rt: Runtime, user_path: str) -> str:
    try:
        return sandbox(rt).check(user_path)
    except SandboxError as exc:
        raise ToolFailure(str(exc)) from None


def read_text(rt: Runtime, rel: str) -> str:
    sb = sandbox(rt)
    info = sb.info(rel)
    if info is None:
        raise ToolFailure(f"'{rel}' does not exist. Use list_files to see what is there.")
    if info.kind == "dir":
        raise ToolFailure(f"'{rel}' is a folder; use list_files to see its content.")
    data = sb.read_bytes(rel, max_bytes=MAX_FILE_BYTES)
    if looks_binary(data):
        raise ToolFailure(f"'{rel}' is a binary file; only text files can be read.")
    return data.decode("utf-8", errors="replace")


# A job has at most 64 commands besides the built-in tools: room for their docs beyond a listing's MAX_LIST.
MAX_DOCS = 128


def docs_prefix(rt: Runtime, base: str) -> str | None:
    """The prefix of the harness's folder of tool docs ("tools/") when a listing or search of ``base`` would go
    through it (only a listing or search of that folder itself shows its files), else None."""
    kept = sandbox(rt).kept_folder
    return f"{kept}/" if kept and base == "." else None
