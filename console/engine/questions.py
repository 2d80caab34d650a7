"""A question an MCP server asks the run's operator during one of its tool calls (MCP elicitation, form mode), when
the operator enabled it for that server: the form it asks for, checked; the operator's answer, checked against it.

The server is untrusted: its form is taken only when it is flat (each property a string, a number, an integer, a
boolean, one choice of a string enum or several of one, as the MCP specification restricts a form), bounded
(:data:`MAX_FIELDS` fields, names of the letters, digits and ``_.-``, short titles and descriptions, made safe to
print), or the request is refused whole. The operator's answer (``agent-console answer RUN --set NAME=VALUE``,
``--decline`` or ``--cancel``) is checked against the form before it is applied (a missing required field, an
unknown name, a value of the wrong type or out of its bounds is refused with why, and the question goes on waiting).
Stdlib only: the operator's state (console.engine.operator) holds the question waiting now, the MCP tools
(console.engine.tools.mcp_elicitation) ask it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from console.engine.text import safe_text

MAX_FIELDS = 16
MAX_MESSAGE = 2000  # characters of the server's message shown (a longer one is cut, and said)
MAX_TITLE = 120
MAX_CHOICES = 32
MAX_VALUE = 4000  # characters of one answered value
# Characters of one field as the operator is shown it (:meth:`FormField.line`: the need's evidence, one line a
# field, all of them): a field longer (32 long choices) cannot be shown whole, and its form is refused.
MAX_LINE = 1000
NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}\Z")
KINDS = ("string", "number", "integer", "boolean")
FORMAT_WORDS = {"email": "an email address", "uri": "a URI", "date": "a date (YYYY-MM-DD)",
                "date-time": "a date and time (ISO 8601)"}
FORMATS = tuple(FORMAT_WORDS)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}\Z")
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:\d{2})?\Z")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,31}\Z")
TRUE = ("true", "yes", "y", "1", "on")
FALSE = ("false", "no", "n", "0", "off")

Action = Literal["accept", "decline", "cancel"]
Value = str | int | float | bool | list[str]


class FormRefused(ValueError):
    """The server's form is not one this client asks its operator (one line: why)."""


@dataclass(frozen=True)
class FormField:
    """One field of the form, as the operator is asked it (every text made safe to print)."""

    name: str
    # "string", "number", "integer", "boolean", "enum" (a string among ``choices``) or "choices" (several of them:
    # ``min_length``..``max_length`` of them)
    kind: str
    title: str = ""
    description: str = ""
    required: bool = False
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    min_length: int | None = None
    max_length: int | None = None
    format: str = ""
    default: str = ""  # the server's default, as text (shown: the server uses it when the field is left out)

    def line(self) -> str:
        """The field in one line, as the operator reads it: ``name (integer, 1-10, required): title``."""
        what = ("one of " + ", ".join(self.choices) if self.kind == "enum" else
                "some of " + ", ".join(self.choices) + ", comma-separated" if self.kind == "choices" else self.kind)
        if self.format:
            what += f", {self.format}"
        if self.minimum is not None or self.maximum is not None:
            low = "" if self.minimum is None else f"{self.minimum:g}"
            high = "" if self.maximum is None else f"{self.maximum:g}"
            what += f", {low}..{high}"
        if self.min_length is not None or self.max_length is not None:
            unit = "of them" if self.kind == "choices" else "characters"
            what += f", {self.min_length or 0}..{'' if self.max_length is None else self.max_length} {unit}"
        if self.default:
            what += f", default {self.default}"
        said = " - ".join(t for t in (self.title, self.description) if t)
        return f"{self.name} ({what}{', required' if self.required else ''})" + (f": {said}" if said else "")


def _text(value: Any, limit: int) -> str:
    return safe_text(value, one_line=True, join=True, limit=limit) if isinstance(value, str) else ""


def _number(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise FormRefused(f"{where} is not a number")
    return float(value)


def _length(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_VALUE:
        raise FormRefused(f"{where} is not a length of 0 to {MAX_VALUE}")
    return value


def _choices(prop: dict[str, Any], where: str, several: bool = False) -> tuple[str, ...]:
    """A string enum's choices: ``enum`` (the 2025-06-18 form) or ``oneOf``/``anyOf`` of ``const`` (2025-11-25's
    titled one). ``several``: a multi-select's, answered comma-separated (each stripped): a choice that could not
    be typed so (a comma in it, spaces at its ends) refuses the form."""
    raw = prop.get("enum")
    titled = prop.get("oneOf", prop.get("anyOf"))
    if raw is None and isinstance(titled, list):
        raw = [o.get("const") if isinstance(o, dict) else None for o in titled]
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_CHOICES:
        raise FormRefused(f"{where}: an enum of 1 to {MAX_CHOICES} choices is expected")
    if not all(isinstance(c, str) and 0 < len(c) <= MAX_TITLE and c == safe_text(c, one_line=True) for c in raw):
        raise FormRefused(f"{where}: each choice must be a short printable text")
    if len(set(raw)) != len(raw):
        raise FormRefused(f"{where}: two choices are the same")
    if several and any("," in c or c != c.strip() for c in raw):
        raise FormRefused(f"{where}: a choice holds a comma or spaces at its ends (several are answered "
                          "comma-separated)")
    return tuple(raw)


def parse_form(schema: Any) -> tuple[FormField, ...]:
    """The fields of ``requestedSchema``; :class:`FormRefused` for a form that is not flat and bounded."""
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        raise FormRefused("its requestedSchema is not an object schema")
    props = schema.get("properties", {})
    if not isinstance(props, dict):
        raise FormRefused("its requestedSchema's properties are not an object")
    if len(props) > MAX_FIELDS:
        raise FormRefused(f"it asks for {len(props)} fields (at most {MAX_FIELDS})")
    required = schema.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise FormRefused("its required list is not a list of names")
    if unknown := [r for r in required if r not in props]:
        raise FormRefused(f"it requires a field it does not define ({_text(unknown[0], 64)})")
    fields: list[FormField] = []
    for name, prop in props.items():
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise FormRefused(f"a field's name ({_text(str(name), 64)}) is not letters, digits and _.- (64 at most)")
        where = f"field {name}"
        if not isinstance(prop, dict):
            raise FormRefused(f"{where} is not a schema")
        kind = prop.get("type")
        items = prop.get("items")
        if kind == "array" and isinstance(items, dict) and items.get("type", "string") == "string" and (
                "enum" in items or "anyOf" in items or "oneOf" in items):
            fields.append(FormField(
                name=name, kind="choices", title=_text(prop.get("title"), MAX_TITLE),
                description=_text(prop.get("description"), 300), required=name in required,
                choices=_choices(items, where, several=True),
                min_length=_length(prop.get("minItems"), f"{where}'s minItems"),
                max_length=_length(prop.get("maxItems"), f"{where}'s maxItems"), default=_default(prop)))
            continue
        if kind == "array" or isinstance(kind, list):
            raise FormRefused(f"{where}: only flat fields are asked (a string, a number, an integer, a boolean, or "
                              "one or several choices of an enum)")
        if kind not in KINDS:
            raise FormRefused(f"{where}: type {_text(str(kind), 20)} is not one a form may ask")
        choices: tuple[str, ...] = ()
        if kind != "string" and any(k in prop for k in ("enum", "oneOf", "anyOf", "const")):
            # Choices are a string's only (the specification's form): others would go to the server unchecked.
            raise FormRefused(f"{where}: choices of a {kind} are not asked (only of a string)")
        if kind == "string" and any(k in prop for k in ("enum", "oneOf", "anyOf")):
            choices, kind = _choices(prop, where), "enum"
        fmt = prop.get("format", "")
        if fmt and (kind != "string" or fmt not in FORMATS):
            raise FormRefused(f"{where}: format {_text(str(fmt), 20)} is not one a form may ask")
        fields.append(FormField(
            name=name, kind=kind, title=_text(prop.get("title"), MAX_TITLE),
            description=_text(prop.get("description"), 300), required=name in required, choices=choices,
            minimum=_number(prop.get("minimum"), f"{where}'s minimum"),
            maximum=_number(prop.get("maximum"), f"{where}'s maximum"),
            min_length=_length(prop.get("minLength"), f"{where}'s minLength"),
            max_length=_length(prop.get("maxLength"), f"{where}'s maxLength"), format=fmt, default=_default(prop)))
    for f in fields:
        if len(f.line()) > MAX_LINE:
            raise FormRefused(f"field {f.name} cannot be shown whole in {MAX_LINE} characters (fewer or shorter "
                              "choices, a shorter description)")
    return tuple(fields)


def _default(prop: dict[str, Any]) -> str:
    """The server's default for a field, as the operator reads it ("" for none, or one that is no plain value)."""
    value = prop.get("default")
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        value = ",".join(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return _text(str(value), 60) if isinstance(value, str | int | float) else ""


def parse_values(pairs: tuple[str, ...]) -> dict[str, str]:
    """``NAME=VALUE`` pairs as a dict (the operator's ``--set``); ValueError for one without ``=`` or given twice."""
    out: dict[str, str] = {}
    for pair in pairs:
        name, eq, value = pair.partition("=")
        name = name.strip()
        if not eq or not name:
            raise ValueError(f"'{safe_text(pair, one_line=True, limit=60)}' is not NAME=VALUE")
        if name in out:
            raise ValueError(f"{safe_text(name, one_line=True, limit=64)} is given twice")
        out[name] = value
    return out


def check_answer(fields: tuple[FormField, ...], values: dict[str, str]) -> dict[str, Value]:
    """The operator's values as the form's types (the content of an accepting answer); ValueError (one line) for
    an unknown field, a missing required one, or a value that is not of its field's type or bounds."""
    by_name = {f.name: f for f in fields}
    for name in values:
        if name not in by_name:
            known = ", ".join(by_name) or "none"
            raise ValueError(f"the question has no field '{safe_text(name, one_line=True, limit=64)}' (its fields: "
                             f"{known})")
    if missing := [f.name for f in fields if f.required and f.name not in values]:
        raise ValueError(f"required field{'s' if len(missing) > 1 else ''} missing: {', '.join(missing)}")
    return {name: _typed(by_name[name], raw) for name, raw in values.items()}


def _typed(f: FormField, raw: str) -> Value:
    if len(raw) > MAX_VALUE:
        raise ValueError(f"{f.name}: at most {MAX_VALUE} characters")
    if f.kind == "choices":
        picked = [c.strip() for c in raw.split(",") if c.strip()]
        if bad := [c for c in picked if c not in f.choices]:
            # Which one, by its place (the refusal is logged: what was typed is never echoed there).
            nth = picked.index(bad[0]) + 1
            raise ValueError(f"{f.name}: the choice number {nth} given is not one of {', '.join(f.choices)}")
        if len(set(picked)) != len(picked):
            raise ValueError(f"{f.name}: a choice is given twice")
        if (f.min_length is not None and len(picked) < f.min_length) or (
                f.max_length is not None and len(picked) > f.max_length):
            raise ValueError(f"{f.name}: {f.min_length or 0} to {f.max_length or len(f.choices)} choices expected")
        return picked
    if f.kind == "boolean":
        low = raw.strip().lower()
        if low not in TRUE + FALSE:
            raise ValueError(f"{f.name}: true or false expected")
        return low in TRUE
    if f.kind == "enum":
        if raw not in f.choices:
            raise ValueError(f"{f.name}: one of {', '.join(f.choices)} expected")
        return raw
    if f.kind in ("integer", "number"):
        try:
            number = int(raw.strip()) if f.kind == "integer" else float(raw.strip())
        except ValueError:
            raise ValueError(f"{f.name}: {'an integer' if f.kind == 'integer' else 'a number'} expected") from None
        if not math.isfinite(number):
            raise ValueError(f"{f.name}: a finite number expected")
        if (f.minimum is not None and number < f.minimum) or (f.maximum is not None and number > f.maximum):
            # The bounds, never the number typed (the refusal is logged: a code one digit too long is still one).
            low = "" if f.minimum is None else f"{f.minimum:g}"
            high = "" if f.maximum is None else f"{f.maximum:g}"
            raise ValueError(f"{f.name}: out of its bounds ({low}..{high})")
        return number
    value = raw
    if f.min_length is not None and len(value) < f.min_length:
        raise ValueError(f"{f.name}: at least {f.min_length} characters")
    if f.max_length is not None and len(value) > f.max_length:
        raise ValueError(f"{f.name}: at most {f.max_length} characters")
    if f.format and not _formatted(f.format, value):
        raise ValueError(f"{f.name}: {FORMAT_WORDS[f.format]} expected")
    return value


def _formatted(fmt: str, value: str) -> bool:
    """Whether ``value`` looks like ``fmt`` (a shape, not a proof: the server checks what it needs). String methods
    where a pattern would backtrack on a long hostile value."""
    if any(c.isspace() for c in value):
        return False
    if fmt == "email":
        local, at, domain = value.partition("@")
        return bool(local and at and "@" not in domain and "." in domain.strip(".") and ".." not in domain)
    if fmt == "uri":
        scheme, colon, rest = value.partition(":")
        return bool(colon and rest and _SCHEME.fullmatch(scheme))
    pattern = _DATE if fmt == "date" else _DATE_TIME
    return pattern.fullmatch(value) is not None


_ASKED = re.compile(r"\(question (q[0-9a-f]{6}), ")


def question_id(message: str) -> str | None:
    """The id of the question a ``mcp_question`` need's message names (console.engine.tools.mcp_elicitation)."""
    found = _ASKED.search(message)
    return found.group(1) if found else None


def question_fields(evidence: list[str] | tuple[str, ...]) -> list[tuple[str, str]]:
    """The fields of a ``mcp_question`` need, from its evidence (:meth:`FormField.line` each): (name, line)."""
    out = []
    for line in evidence:
        name = line.split(" (", 1)[0]
        if " (" in line and NAME.fullmatch(name):
            out.append((name, line))
    return out


@dataclass
class Question:
    """The question waiting for the operator now (:attr:`console.engine.operator.OperatorState.question`): its id
    (the need's, the answer command's ``--question``), its form, and once answered the operator's answer."""

    id: str
    server: str
    fields: tuple[FormField, ...]
    action: Action | None = None
    content: dict[str, Value] = field(default_factory=dict)
    by: str = ""

    def answer(self, action: Action, values: dict[str, str], by: str) -> str:
        """Apply the operator's answer: what is said back (ValueError, one line, when it does not fit the form)."""
        if self.action is not None:
            raise ValueError("it was answered already")
        content = check_answer(self.fields, values) if action == "accept" else {}
        if action != "accept" and values:
            raise ValueError(f"a {action} carries no values")
        self.action, self.content, self.by = action, content, by
        if action == "accept":
            return f"answered question {self.id} of MCP server {self.server}" + (
                f" ({', '.join(content)})" if content else " (no values)")
        return f"question {self.id} of MCP server {self.server}: {'declined' if action == 'decline' else 'cancelled'}"
