"""What a turn costs, from the model's prices.

The engine owns the price record and the arithmetic; where prices come from (the provider registry's
table, the operator's overrides) is the outer layers' business. Prices are US dollars per million tokens,
as the providers publish them. ``input_tokens`` is the whole prompt (cached and cache-written tokens
included, as :class:`~console.engine.model.Usage` defines it), so the uncached share is what is left.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # `jobs` formats costs without loading the provider protocol
    from console.engine.model import Usage

PER = 1_000_000
# A job's cost above this is no figure of dollars (a corrupt or foreign store row): it reads as unknown, as the fleet
# budget's store counts such an amount as nothing (console.engine.store.fleet.MAX_USD).
MAX_COST_USD = 1e9


@dataclass(frozen=True, slots=True)
class Prices:
    """US dollars per million tokens. A missing cached or cache-write price means "as plain input"."""

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None

    def __post_init__(self) -> None:
        for name in ("input", "output", "cached_input", "cache_write"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < 1e6:
                raise ValueError(f"price {name} must be a number of dollars per million tokens, >= 0")

    @property
    def free(self) -> bool:
        """Every token costs nothing (the offline demo model's price): no spend to count, none to hold."""
        return not (self.input or self.output or self.cached_input or self.cache_write)

    def cost(self, usage: Usage) -> float:
        cached = max(0, min(usage.cached_input_tokens, usage.input_tokens))
        written = max(0, min(usage.cache_write_tokens, usage.input_tokens - cached))
        plain = usage.input_tokens - cached - written
        cached_price = self.input if self.cached_input is None else self.cached_input
        write_price = self.input if self.cache_write is None else self.cache_write
        return (plain * self.input + cached * cached_price + written * write_price
                + max(0, usage.output_tokens) * self.output) / PER


def format_cost(usd: float | None) -> str:
    """``$0.0042``, ``$1.27``, ``$312``: enough digits to see a cheap turn, no more for a dear job. A figure that is
    no amount (negative, not finite, above :data:`MAX_COST_USD`) is "cost unknown", as None is: -1e308 was printed
    as 309 digits, wider than any page or column."""
    if usd is None or not (math.isfinite(usd) and 0 <= usd <= MAX_COST_USD):
        return "cost unknown"
    if usd == 0:
        return "$0.00"
    if usd < 0.01:
        return f"${usd:.4f}"
    if usd < 100:
        return f"${usd:.2f}"
    return f"${usd:,.0f}"
