"""The single door through which every read and write of a job file passes.

Why it exists: the agent's paths and file contents are hostile input, and path strings cannot be
trusted between two system calls. Checking a path and then re-opening it lets a symlink swapped in
between lead out of the folder; a hard link makes an outside file look like an inside one; opening a
named pipe blocks forever; and the agent must never rewrite job.toml (its own definition, including
the endpoint that receives the API key) nor reach the harness's own state in ``.console/``.

So, for the agent's file tools and for the engine's own reads of main_plan.md, SYSTEM_PROMPT.md etc.:

* ``check()`` validates the string once (no absolute paths, no ``..``, no NUL, sane lengths, not the
  harness folder).
* Resolution is by file descriptor from a directory fd kept open on the job root, never by re-opening a
  path string: ``openat2(RESOLVE_BENEATH)`` where the kernel has it, otherwise a component-by-component
  walk with O_NOFOLLOW that follows relative symlinks itself and refuses absolute ones and any that climb
  above the root. Both modes refuse to land in the harness folder and behave the same.
* Every check (kind, hard links, size) is an fstat of the fd that is then read or written: nothing can
  change between the check and the use. The one name-based step is the final rename of a finished temp
  file into the parent folder's fd, and rename never follows a symlink.
* Opens use O_NONBLOCK, so a FIFO cannot hang the engine; only regular files with one link are used.
* Writes are atomic through a temp file in ``.console/tmp`` (never in the agent's folder), under a
  per-write and a whole-job size limit, and the operator's files (job.toml, instructions.md) are
  refused, including the real file a protected symlink points to, and so is anything in the folder of the
  tool docs the harness writes (``keep_folder``), and a repository's control files (``.git/config``, hooks,
  a nested ``.git``, a folder shaped as a bare repository: :mod:`.vcs_guard`), which the operator's own git runs.

Stdlib only and free of console.* imports on purpose (but :mod:`console.engine.vcs`, stdlib only too, which holds
the version-control rules the commands and the run's copy share): it sits below everything that touches job files.

The door is one class, :class:`Sandbox` (:mod:`.door`, the public face, and the reads), over named parts, each a
module named after what it does and each built on one shared :class:`.root.Root` (the job folder's fd and key, its
lock, the tool docs' folder, where the repository has git run files outside its .git): :mod:`.resolve` (a path to
an fd beneath the root), :mod:`.guards` (what the agent may not touch), :mod:`.quota` (the size limits),
:mod:`.temp` (atomic replacement), :mod:`.writes` (a whole file, an append) and :mod:`.listing` (walk). Below
them, :mod:`.kernel` (openat2 and the fd-level reads and writes) and :mod:`.answers` (file infos, write results,
refusals); :mod:`.vcs_guard` is what the guards and the walk ask about a repository's control files.
"""

from __future__ import annotations

from console.engine.sandbox.answers import FileInfo, SandboxError, WriteResult
from console.engine.sandbox.door import Sandbox
from console.engine.sandbox.guards import HARNESS_KEPT

__all__ = ["HARNESS_KEPT", "FileInfo", "Sandbox", "SandboxError", "WriteResult"]
