"""A model's JSON (or data) by its own compiled serializer, for the dumps of every turn (issue 37: instructions a
turn).

``model.model_dump_json(...)`` hands pydantic-core all sixteen of its options by keyword, then decodes the bytes to
a str; pydantic-core's parsing of those keywords is about half of a small model's dump (1.6 against 3.0 us for a
tool_result event). :func:`model_json` gives the serializer only the option it is asked for and returns its bytes:
the same JSON (tests/unit/test_model_json.py), in half the time, for the events (five a turn), the journal's
messages and checkpoints (two each) and the state a step records.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


def model_json(model: BaseModel, *, exclude_none: bool = False, exclude_defaults: bool = False) -> bytes:
    """``model.model_dump_json(exclude_none=..., exclude_defaults=...).encode()``; raises as it does (ValueError on
    a lone surrogate). The model must be built (an instance of a deferred model is: its validation built it)."""
    serializer: Any = model.__pydantic_serializer__
    if exclude_none and exclude_defaults:
        return serializer.to_json(model, exclude_none=True, exclude_defaults=True)  # type: ignore[no-any-return]
    if exclude_none:
        return serializer.to_json(model, exclude_none=True)  # type: ignore[no-any-return]
    if exclude_defaults:
        return serializer.to_json(model, exclude_defaults=True)  # type: ignore[no-any-return]
    return serializer.to_json(model)  # type: ignore[no-any-return]


def model_data(model: BaseModel) -> dict[str, Any]:
    """``model.model_dump()`` by the model's own serializer, without model_dump's keywords (a tool call's arguments,
    dumped for the policies' gate and the record of the run's calls at every call)."""
    serializer: Any = model.__pydantic_serializer__
    return serializer.to_python(model)  # type: ignore[no-any-return]
