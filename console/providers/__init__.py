"""Model adapters. ``make_provider`` builds the one a run asks for, from the registry.

The names are loaded on first use: the command line imports the registry at every start (for --provider's
choices), and the engine's types pull in pydantic, which `--help` and `jobs` do not need.
"""

from __future__ import annotations

from typing import Any

__all__ = ["PROVIDERS", "Provider", "ProviderError", "make_provider"]


def __getattr__(name: str) -> Any:
    if name in ("Provider", "ProviderError"):
        from console.engine import model

        return getattr(model, name)
    if name in ("PROVIDERS", "make_provider"):
        from console.providers import registry

        return getattr(registry, name)
    raise AttributeError(name)
