"""main_plan.md as a view shows it (the console's plan pane, serve's run page): the agent's file, read without
trusting it: through the job folder's sandbox (never a link out of the folder, never a pipe or a device, never
blocking), bounded, made safe for a terminal. Plain Python: no Textual."""

from __future__ import annotations

from pathlib import Path

from console.engine.sandbox import Sandbox, SandboxError
from console.engine.text import safe_text

PLACEHOLDER = "*main_plan.md has not been written yet: the agent writes it during bootstrap.*"
# Far above a real plan (20 phases of 20 steps is ~25 KB), and about what Textual's Markdown widget lays out in a
# few seconds: a larger file is said to be too large, never read (a 50 MB plan must not fill the console's memory).
PLAN_MAX_BYTES = 64 * 1024


def _kb(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{max(1, round(n / 1024))} KB"


def read_plan(path: Path, max_bytes: int = PLAN_MAX_BYTES) -> str:
    """The Markdown the plan pane shows for ``path`` (main_plan.md in its job folder): the plan's text made safe
    for the terminal, the placeholder while there is none, or one line saying why it is not shown. Never raises;
    never blocks (the sandbox opens with O_NONBLOCK and reads only regular files); holds no fd once it returns."""
    name = path.name
    try:
        with Sandbox(path.parent) as box:
            info = box.info(name)
            if info is None:
                return PLACEHOLDER
            if info.kind == "file" and info.size > max_bytes:
                return (f"*{name} is not shown: it is {_kb(info.size)}, over the {_kb(max_bytes)} this pane shows. "
                        f"Open it in an editor.*")
            text = box.read_text(name, max_bytes=max_bytes)
    except SandboxError as exc:  # a pipe, a device, a link out of the folder, a file that grew past the limit
        return f"*{name} is not shown: {safe_text(str(exc), one_line=True)}*"
    except OSError as exc:  # the job folder itself is gone or cannot be opened
        why = safe_text(exc.strerror or type(exc).__name__, one_line=True)
        return f"*{name} cannot be read: {why}.*"
    return safe_text(text)
