"""Importing an SDK without the optional parts it would load for nothing.

The ``openai`` SDK imports ``aiohttp`` at its own import whenever aiohttp is installed, for an optional client
(``DefaultAioHttpClient``) this harness never uses; aiohttp is installed here (textual-serve and the kubernetes
client need it), so every runner paid for it: ~9 MB of resident memory and ~80 ms of CPU at its start
(benchmarks/fleet_scale.py counts memory per run). The SDK takes a missing aiohttp as its documented case (that
client then says to install the extra), so it is hidden from that one import, and only if nothing loaded it before.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def without(*names: str) -> Iterator[None]:
    """Within the block, ``import NAME`` of each of ``names`` not already imported raises ImportError (a None in
    ``sys.modules``, as Python documents); after it, they import as ever. Meant for a module's own import, made
    once, before the process starts its threads."""
    hidden = [n for n in names if n not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        for name in hidden:
            if sys.modules.get(name, 0) is None:
                del sys.modules[name]
