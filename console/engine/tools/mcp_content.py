"""An MCP tool result's non-text content (images, audio, embedded resources) saved into the job folder.

A server's answer may carry, besides text, an image, audio or a resource (text or bytes) inline, and links to
resources. The agent reads text only; so the harness writes each inline block into the job folder, where the agent
(and the job's commands) can open it, and tells the agent where, with its type and size:

- under ``mcp-output/SERVER/`` (:data:`OUTPUT_DIR`), named ``STEM-N.EXT``: ``STEM`` a random name recorded with the
  call's intent in the journal (the same after a resume), ``N`` the block's place among the answer's saved blocks,
  ``EXT`` from :data:`EXTENSIONS` by its mime type (``.bin`` for any other). Nothing of the name comes from the server
  (not its uri, its resource name nor its mime type as written): it cannot name ``../../job.toml`` or ``.git/config``;
- through the job's sandbox (:mod:`console.engine.sandbox`): written atomically (its temp file in the harness's own
  folder), never through a symlink (not even one to a folder of the job: ``mcp-output`` and its server folders must be
  folders), never over job.toml, instructions.md, ``.git`` or ``.console``, within the job
  folder's quota; never over a file that is already there;
- bounded: a block of more than :data:`MAX_BLOCK_BYTES` decoded, or past :data:`MAX_CALL_BYTES` for the call, or
  past the :data:`MAX_BLOCKS` th, is not saved, and the agent is told so; base64 is decoded strictly (data that is not
  valid base64 is not saved, and said);
- a resource *link* is named (its uri, escaped), never fetched.

The saving happens after the server answered and before the call's result is recorded. A kill -9 between the two: the
call is of unknown outcome after the resume (never sent again), and the agent is told which of its files were saved
(each whole: written atomically), so no file is there that it is never told of.
"""

from __future__ import annotations

import binascii
import secrets
from base64 import b64decode
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from console.engine import failpoints
from console.engine.sandbox import SandboxError
from console.engine.text import safe_text

if TYPE_CHECKING:
    from console.engine.runtime import Runtime

OUTPUT_DIR = "mcp-output"
MAX_BLOCK_BYTES = 4 * 1024 * 1024  # one block, decoded (a large screenshot fits)
MAX_CALL_BYTES = 6 * 1024 * 1024  # all the blocks one call saves
MAX_BLOCKS = 32  # blocks one call saves; the rest are counted, not saved
MAX_READ = 48  # blocks of one answer considered at all (each is a line for the agent); the rest are counted

# The extension of a saved block by its mime type (parameters and case ignored); any other type is saved as .bin:
# the server's words never make a file name.
EXTENSIONS = {
    "image/png": ".png", "image/jpeg": ".jpg", "image/jpg": ".jpg", "image/gif": ".gif", "image/webp": ".webp",
    "image/bmp": ".bmp", "image/svg+xml": ".svg", "image/tiff": ".tiff", "image/avif": ".avif",
    "audio/wav": ".wav", "audio/x-wav": ".wav", "audio/wave": ".wav", "audio/mpeg": ".mp3", "audio/mp3": ".mp3",
    "audio/ogg": ".ogg", "audio/webm": ".weba", "audio/flac": ".flac", "audio/aac": ".aac", "audio/mp4": ".m4a",
    "text/plain": ".txt", "text/markdown": ".md", "text/html": ".html", "text/csv": ".csv", "text/xml": ".xml",
    "text/css": ".css", "text/javascript": ".js", "application/json": ".json", "application/xml": ".xml",
    "application/pdf": ".pdf", "application/zip": ".zip", "application/gzip": ".gz", "application/x-tar": ".tar",
    "application/yaml": ".yaml", "text/yaml": ".yaml", "application/x-yaml": ".yaml", "text/x-python": ".py",
}


@dataclass(frozen=True)
class McpBlock:
    """One non-text block of a server's answer, as the MCP client read it: raw, untrusted.

    ``kind``: "image", "audio", "resource" (embedded: its bytes, or its text encoded as UTF-8, are ``data``) or
    "resource_link" (never fetched: no data). ``data`` None: nothing to save (``why`` says why: its base64 was not
    valid, it is bigger than :data:`MAX_BLOCK_BYTES`); ``size`` its size decoded (estimated from the base64 when it
    was too big to decode)."""

    kind: str
    mime: str = ""
    data: bytes | None = None
    size: int = 0
    why: str = ""
    uri: str = ""
    name: str = ""


def decode_base64(kind: str, text: str, *, mime: str = "", uri: str = "", name: str = "") -> McpBlock:
    """A block from its base64 ``text``: decoded strictly, or not at all (past :data:`MAX_BLOCK_BYTES`, or not
    valid base64: ``why`` says)."""
    estimate = len(text) // 4 * 3
    if estimate > MAX_BLOCK_BYTES + 3:
        return McpBlock(kind, mime, None, estimate, f"it is about {estimate:,} bytes, more than the "
                                                     f"{MAX_BLOCK_BYTES:,} one block may be", uri, name)
    try:
        data = b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, ValueError, UnicodeEncodeError):
        return McpBlock(kind, mime, None, 0, "its data is not valid base64", uri, name)
    return from_bytes(kind, data, mime=mime, uri=uri, name=name)


def from_bytes(kind: str, data: bytes, *, mime: str = "", uri: str = "", name: str = "") -> McpBlock:
    if len(data) > MAX_BLOCK_BYTES:
        return McpBlock(kind, mime, None, len(data), f"it is {len(data):,} bytes, more than the "
                                                     f"{MAX_BLOCK_BYTES:,} one block may be", uri, name)
    return McpBlock(kind, mime, data, len(data), "", uri, name)


def extension(mime: str) -> str:
    return EXTENSIONS.get(mime.split(";", 1)[0].strip().lower(), ".bin")


def new_stem() -> str:
    """The name a call's files share (recorded with its intent): random, so that no two calls of a run, nor a call
    of a run copied from this one, meet."""
    return secrets.token_hex(6)


def folder(server: str) -> str:
    """The job-relative folder of a server's files (its name is a checked one: letters, digits and '-')."""
    return f"{OUTPUT_DIR}/{server}"


def _what(block: McpBlock, size: int | None) -> str:
    """How a block is named to the agent: its kind, the server's uri (escaped), its mime type and size."""
    kind = {"resource_link": "resource link"}.get(block.kind, block.kind)
    about = [safe_text(block.mime, one_line=True, limit=80)] if block.mime else []
    if size is not None:
        about.append(f"{size:,} bytes")
    uri = f" {safe_text(block.uri, one_line=True, limit=200)}" if block.uri else ""
    name = f" '{safe_text(block.name, one_line=True, limit=80)}'" if block.name else ""
    return f"{kind}{name}{uri}" + (f" ({', '.join(about)})" if about else "")


def save(rt: Runtime, server: str, stem: str, blocks: Sequence[McpBlock]) -> list[str]:
    """Each block saved under :func:`folder` (or not, and why): one line for the agent each."""
    lines: list[str] = []
    saved = total = 0
    sb = rt.sandbox
    for block in blocks[:MAX_READ]:
        if block.kind == "resource_link":
            lines.append(f"- {_what(block, None)}: a link, not fetched")
            continue
        if block.data is None:
            lines.append(f"- {_what(block, block.size or None)}: not saved: {block.why}")
            continue
        if saved >= MAX_BLOCKS:
            lines.append(f"- {_what(block, block.size)}: not saved: a call saves at most {MAX_BLOCKS} blocks")
            continue
        if total + len(block.data) > MAX_CALL_BYTES:
            lines.append(f"- {_what(block, block.size)}: not saved: the call's blocks would be more than the "
                         f"{MAX_CALL_BYTES:,} bytes one call may save")
            continue
        saved += 1
        rel = f"{folder(server)}/{stem}-{saved}{extension(block.mime)}"
        why = _write(rt, rel, block.data) if sb is not None else "the job folder is not open"
        if why:
            lines.append(f"- {_what(block, block.size)}: not saved: {why}")
            continue
        total += len(block.data)
        lines.append(f"- {_what(block, block.size)}: saved as {rel}")
    if len(blocks) > MAX_READ:
        lines.append(f"- {len(blocks) - MAX_READ:,} more blocks: not saved (an answer is read up to {MAX_READ})")
    return lines


def _write(rt: Runtime, rel: str, data: bytes) -> str:
    """'' once ``rel`` holds ``data`` (written whole: atomically, never through a link), else why not."""
    assert rt.sandbox is not None
    sb = rt.sandbox
    try:
        # The sandbox would follow a link that stays in the job folder; these folders are the harness's to name,
        # so a link there (the agent's or the server's) is not followed at all.
        top, server = rel.split("/")[:2]
        for where in (top, f"{top}/{server}"):
            info = sb.info(where)
            if info is not None and info.kind != "dir":
                return f"{where} is not a folder (a {'symbolic link' if info.kind == 'symlink' else info.kind}), " \
                       "and is not followed"
        if sb.info(rel) is not None:
            return "a file of its name is already in the job folder (it is not replaced)"
        if len(data) > sb.quota.max_write_bytes:  # the sandbox's own words would tell the agent to append pieces
            return (f"it is more than the {sb.quota.max_write_bytes:,} bytes the run writes at once (max_write_mb in "
                    "job.toml)")
        failpoints.hit(f"mcp save {rel}", tear=lambda: _stray_temp(rt, data))
        sb.write_bytes(rel, data)
    except SandboxError as exc:
        return safe_text(str(exc), one_line=True, limit=300)
    except OSError as exc:
        return f"it could not be written ({safe_text(exc.strerror or type(exc).__name__, one_line=True)})"
    return ""


def _stray_temp(rt: Runtime, data: bytes) -> None:
    """What a kill between writing a temp file and renaming it leaves (for the kill-point tests): in the harness's
    temp folder, which the next start sweeps."""
    tmp = rt.paths.state / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / ".killed-mid-save.tmp").write_bytes(data[: len(data) // 2])


def saved_before(rt: Runtime, server: str, stem: str) -> list[str]:
    """The files a call of ``stem`` saved before a kill interrupted it (each whole), job-relative."""
    sb = rt.sandbox
    if sb is None or not stem:
        return []
    try:
        if sb.info(folder(server)) is None:
            return []
        found = sb.walk(folder(server), limit=10_000)
    except SandboxError:
        return []
    prefix = f"{folder(server)}/{stem}-"
    return sorted((f.rel for f in found if f.rel.startswith(prefix) and "/" not in f.rel[len(prefix):]),
                  key=lambda rel: (len(rel), rel))
