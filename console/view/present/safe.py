"""Events made safe for a terminal before any view folds them: every text field, at any depth."""

from __future__ import annotations

import functools
import types
import typing
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from console.engine import events as ev
from console.engine.text import safe_text


def safe_event(e: ev.EventBase) -> ev.EventBase:
    """``e`` with every text it carries, at any depth, made safe for a terminal (multi-line: a reply or a tool
    result keeps its newlines and tabs; see :func:`console.engine.text.safe_text`). The views fold what they show
    from this, so no field of an event can reach a widget raw. ``e`` itself when nothing needed it (the usual
    case: a check of each string, no copy)."""
    update = _safe_fields(e)
    return e if update is None else e.model_copy(update=update)


def _safe_fields(model: BaseModel) -> dict[str, Any] | None:
    update: dict[str, Any] = {}
    values = model.__dict__
    for name in _text_fields(type(model)):
        value = values.get(name)
        safe = _safe_value(value)
        if safe is not value:
            update[name] = safe
    return update or None


@functools.cache
def _text_fields(cls: type[BaseModel]) -> tuple[str, ...]:
    """The fields of ``cls`` that may hold text: not its numbers, times, flags or Literal constants (a view folds
    thousands of text deltas a second: each is one string to check, not eight fields)."""
    return tuple(name for name, field in cls.model_fields.items() if _may_hold_text(field.annotation))


def _may_hold_text(annotation: Any) -> bool:
    if annotation in (int, float, bool, datetime, type(None)):
        return False
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return False  # validated against our own constants when the event was made or read
    if origin in (typing.Union, types.UnionType):
        return any(_may_hold_text(arg) for arg in typing.get_args(annotation))
    return True


def _safe_value(value: Any) -> Any:
    """``value`` made safe, or ``value`` itself (the same object) when it is already."""
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, BaseModel):
        update = _safe_fields(value)
        return value if update is None else value.model_copy(update=update)
    if isinstance(value, list | tuple):
        items = [_safe_value(v) for v in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        pairs = [(_safe_value(k), _safe_value(v)) for k, v in value.items()]
        same = all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, value.items(), strict=True))
        return value if same else dict(pairs)
    return value
