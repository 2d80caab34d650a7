"""Two shapes of the same behaviour, for the scan's own test (test_parts.py): a stack and an owner with a part."""

from __future__ import annotations


class Lower:
    def total(self) -> int:
        return len(self.items)  # type: ignore[attr-defined]  # set by Upper only: an upward reference

    def flush(self) -> None:
        raise NotImplementedError


class Upper(Lower):
    def __init__(self) -> None:
        self.items: list[int] = []

    def flush(self) -> None:
        self.items.clear()


class Counting:
    def __init__(self, items: list[int]) -> None:
        self.items = items

    def total(self) -> int:
        return len(self.items)


class Owner:
    def __init__(self) -> None:
        self.items: list[int] = []
        self.counting = Counting(self.items)


class BadOwner:
    def __init__(self) -> None:
        self.counting = Counting(self)  # type: ignore[arg-type]
