"""Model adapters. ``make_provider`` builds the one a run asks for, from the registry."""

from __future__ import annotations

from console.engine.model import Provider, ProviderError
from console.providers.registry import PROVIDERS, make_provider

__all__ = ["PROVIDERS", "Provider", "ProviderError", "make_provider"]
