"""The typed records of the run settings, held to their table (console.engine.run_setting_specs).

A pydantic model that holds a run setting (the config file's Settings, job.toml's sections, the launch record)
declares it as a typed field, whose default and bounds come from its spec (:func:`setting_field`); at import,
:func:`check_fields` holds the model to the table: every setting the table gives it is a field of the type the
table says, with the table's bounds and default (:func:`check_record`: RunSettings, a dataclass, has each setting
with the table's default). That a record holds no setting the table lacks is tests/unit/test_run_setting_specs.py's:
a record's other fields are not settings, and only a test knows which.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, Field

from console.engine.run_setting_specs import BY_NAME, RunSettingSpec


def setting_field(name: str, *, optional: bool = False) -> Any:
    """The pydantic Field of setting ``name``: its default (None where ``optional``: a layer that may leave it to
    the next) and its bounds."""
    spec = BY_NAME[name]
    default: Any = None if optional else spec.default
    bounds: dict[str, Any] = spec.bounds.pydantic()
    return Field(default=default, **bounds)


def _annotation_of(spec: RunSettingSpec, optional: bool) -> Any:
    base: Any = typing.Literal[spec.choices] if spec.choices else spec.type
    return base | None if optional or (spec.default is None and spec.config is not None) else base


def _bounds(info: Any) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in info.metadata:
        for key in ("gt", "ge", "lt", "le"):
            if getattr(item, key, None) is not None:
                out[key] = getattr(item, key)
    return out


def _same_type(annotation: Any, wanted: Any) -> bool:
    if annotation == wanted:
        return True
    # A Literal's choices compared as a set, X | None as Optional[X]: the same type written another way.
    a, w = typing.get_args(annotation), typing.get_args(wanted)
    origins = {typing.get_origin(annotation), typing.get_origin(wanted)}
    return bool(a) and set(a) == set(w) and origins <= {typing.Union, types.UnionType, typing.Literal}


def problems(model: type[BaseModel], fields: dict[str, str], *, optional: bool = False,
             default: bool = True) -> list[str]:
    """What in ``model`` disagrees with the table: ``fields`` maps each of its fields that holds a setting to the
    setting; ``optional``: the fields may be None (a layer that leaves the setting to the next), their default None;
    ``default``: the defaults are the table's (not the launch record's, whose None is "not recorded")."""
    out: list[str] = []
    for field_name, setting in fields.items():
        spec = BY_NAME[setting]
        info = model.model_fields.get(field_name)
        where = f"{model.__name__}.{field_name}"
        if info is None:
            out.append(f"{where}: missing (console.engine.run_setting_specs has {setting})")
            continue
        if not _same_type(info.annotation, _annotation_of(spec, optional)):
            out.append(f"{where}: {info.annotation} where the table says {_annotation_of(spec, optional)}")
        if _bounds(info) != spec.bounds.pydantic():
            out.append(f"{where}: bounds {_bounds(info)} where the table says {spec.bounds.pydantic()}")
        if default and info.default != (None if optional else spec.default):
            out.append(f"{where}: default {info.default!r} where the table says {spec.default!r}")
    return out


def check_fields(model: type[BaseModel], fields: dict[str, str] | Iterable[str], **kw: Any) -> None:
    """RuntimeError at import naming each disagreement (:func:`problems`): a setting spelled twice, differently."""
    mapping = fields if isinstance(fields, dict) else {name: name for name in fields}
    if found := problems(model, mapping, **kw):
        raise RuntimeError("the run settings' table (console/engine/run_setting_specs.py) and "
                           f"{model.__module__}.{model.__name__} disagree: " + "; ".join(found))


def check_record(record: type, names: Iterable[str]) -> None:
    """RuntimeError at import if the dataclass ``record`` (RunSettings) lacks a setting of ``names``, or gives one
    another default than the table's."""
    import dataclasses

    fields = {f.name: f for f in dataclasses.fields(record)}
    found = [f"{name}: missing" if name not in fields else f"{name}: default {fields[name].default!r} where the "
             f"table says {BY_NAME[name].default!r}" for name in names
             if name not in fields or fields[name].default not in (dataclasses.MISSING, BY_NAME[name].default)]
    if found:
        raise RuntimeError(f"the run settings' table (console/engine/run_setting_specs.py) and {record.__name__} "
                           "disagree: " + "; ".join(found))
