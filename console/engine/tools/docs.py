"""The tools' full docs (seed 000's layer 3: "short descriptions with references to full docs in tools/").

The system prompt carries one short line per tool, ending with the path of its doc; the doc says the rest:
what the tool does, its arguments, examples of calls, the errors it returns and what to do about each, and the
harness's rules that apply to it. Everything comes from the tool's definition (:class:`.registry.Tool`): the
arguments from :func:`.registry.clean_schema`, the very schema the providers are sent, so a doc cannot drift
from what the model is asked to send; the examples, errors and rules from the fields declared beside the
handler (the examples are validated against the argument model when the tool is defined). Job-declared
commands get theirs from their job.toml entry (:func:`.commands.build_command_tools`).

Rendering is pure (text in, text out); :mod:`.docs_folder` writes the files into the job folder.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from console.engine.tools.registry import Failure, Tool

# The first line of every file the harness writes there: it marks the file as the harness's (docs_folder only
# ever replaces or removes a file that starts with it), and tells a reader not to edit it.
HEADER = "<!-- agent-console: generated from the tools' definitions at each session start; read-only -->"
INDEX = "README.md"

# What every tool can answer, whatever it is.
DENIED = Failure("a policy of the job denies the call (the result starts with 'Denied by')",
                 "do what the result says; the same call is denied again")
BAD_ARGS = Failure("the arguments are not valid (a wrong type, a value outside its limits, a missing or unknown "
                   "argument, not a JSON object)",
                   "the result names the argument and what it expects; call again with it corrected")
NO_ARGS = Failure("it is given any argument", "call it with no arguments: {}")


@dataclass(frozen=True)
class DocContext:
    """The run's facts the docs state: where they are, and the limits job.toml set for this job."""

    folder: str = "tools"
    max_write_mb: float = 4.0
    max_job_mb: float = 1024.0
    # False when the operator ran the job's commands unconfined (run --unconfined): they can then change anything.
    commands_confined: bool = True

    def fill(self, text: str) -> str:
        """``text`` with the fields {folder}, {max_write_mb} and {max_job_mb} filled in and "{{" made "{" (see
        :func:`literal`); any other brace is text."""
        values = {"folder": self.folder, "max_write_mb": f"{self.max_write_mb:g}", "max_job_mb": f"{self.max_job_mb:g}"}
        return _FIELD.sub(lambda m: values[m[1]] if m[1] else "{", text)


def literal(text: str) -> str:
    """``text`` (the operator's: a job.toml argv) as it is, whatever fields it seems to hold, once filled in."""
    return text.replace("{", "{{")


_FIELD = re.compile(r"\{\{|\{(folder|max_write_mb|max_job_mb)\}")


def _sentence(text: str, *, capital: bool = True) -> str:
    """One line ending with a full stop (its first letter capitalised unless ``capital`` is False)."""
    text = " ".join(text.split())
    if not text:
        return text
    if capital:
        text = text[0].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def _failure(f: Failure, ctx: DocContext) -> str:
    return f"- {_sentence(ctx.fill(f.when)).removesuffix('.')}: {_sentence(ctx.fill(f.then), capital=False)}"


def _kind(prop: dict[str, Any]) -> str:
    if "enum" in prop:
        return "one of " + ", ".join(json.dumps(v) for v in prop["enum"])
    if "anyOf" in prop:
        return " or ".join(_kind(p) for p in prop["anyOf"])
    kind = prop.get("type", "value")
    if kind == "array":
        return f"array of {_kind(prop.get('items', {}))}"
    return str(kind)


def _span(low: Any, high: Any, unit: str) -> str | None:
    if low is not None and high is not None:
        return f"{low}-{high} {unit}"
    if high is not None:
        return f"at most {high} {unit}"
    if low is not None and low > 0:
        return f"at least {low} {unit}"
    return None


def _limits(prop: dict[str, Any]) -> list[str]:
    out = [_span(prop.get("minLength"), prop.get("maxLength"), "characters"),
           _span(prop.get("minItems"), prop.get("maxItems"), "items")]
    low, high = prop.get("minimum"), prop.get("maximum")
    if low is not None and high is not None:
        out.append(f"{low} to {high}")
    elif low is not None:
        out.append(f">= {low}")
    elif high is not None:
        out.append(f"<= {high}")
    if "exclusiveMinimum" in prop:
        out.append(f"> {prop['exclusiveMinimum']}")
    if "exclusiveMaximum" in prop:
        out.append(f"< {prop['exclusiveMaximum']}")
    return [x for x in out if x]


def _properties(schema: dict[str, Any], indent: str = "") -> list[str]:
    """One line per property (and nested lines for the properties of an object or of an array's items)."""
    required = set(schema.get("required", []))
    lines = []
    for name, prop in schema.get("properties", {}).items():
        facts = [_kind(prop), "required" if name in required else "optional"]
        if "default" in prop:
            facts.append(f"default {json.dumps(prop['default'])}")
        facts += _limits(prop)
        lines.append(f"{indent}- `{name}` ({', '.join(facts)}): {_sentence(prop.get('description', ''))}".rstrip())
        inner = prop.get("items", {}) if prop.get("type") == "array" else prop
        if inner.get("type") == "object" and inner.get("properties"):
            lines += _properties(inner, indent + "  ")
    return lines


def arguments(tool: Tool[Any]) -> list[str]:
    """The Arguments section's lines, from the schema the providers are sent."""
    schema = tool.parameters()
    if not schema.get("properties"):
        return ["None: call it with `{}`."]
    return _properties(schema)


def _fence(text: str) -> str:
    longest = run = 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def errors(tool: Tool[Any]) -> list[Failure]:
    """The tool's own errors, then those every tool can return."""
    generic = BAD_ARGS if tool.params else NO_ARGS
    return [*tool.errors, generic, DENIED]


def render_doc(tool: Tool[Any], ctx: DocContext) -> str:
    """``tools/<name>.md``: what the tool does, its arguments, examples, errors, and the rules that apply."""
    out = [HEADER, f"# {tool.name}", "", _sentence(tool.description)]
    if tool.details:
        out += ["", ctx.fill(tool.details).strip()]
    out += ["", "## Arguments", "", *arguments(tool)]
    if tool.examples:  # an MCP server's tool has none of ours
        out += ["", "## Examples"]
    for ex in tool.examples:
        text = json.dumps(ex.args, ensure_ascii=False)
        fence = _fence(text)
        out += ["", _sentence(ctx.fill(ex.says)), f"{fence}json", text, fence]
    out += ["", "## Errors", "", "A failed call's result says what went wrong; here is what to do about each.", ""]
    out += [_failure(f, ctx) for f in errors(tool)]
    if tool.rules:
        out += ["", "## Rules", ""]
        out += [f"- {_sentence(ctx.fill(rule))}" for rule in tool.rules]
    return "\n".join(out) + "\n"


def render_index(tools: Sequence[Tool[Any]], ctx: DocContext) -> str:
    """``tools/README.md``: the list of docs and what holds for every tool."""
    out = [HEADER, "# Tool docs", "",
           f"One file per tool: `{ctx.folder}/<tool>.md`. They are written by the harness from the tools' "
           "definitions at each session start, so they always match the tools you are given. This folder is "
           "read-only: the file tools refuse to change it" + (", and commands see it read-only." if
                                                            ctx.commands_confined else "."), "",
           "## Tools", ""]
    out += [f"- [{t.name}]({t.doc_name}): {_sentence(t.summary or t.description.split('.')[0])}" for t in tools]
    out += ["", "## Every tool", "",
            "- A call's arguments are one JSON object; `{}` for a tool without arguments.",
            "- Paths are relative to the job folder; nothing outside it can be reached.",
            _failure(BAD_ARGS, ctx), _failure(DENIED, ctx)]
    return "\n".join(out) + "\n"


def doc_problems(tool: Tool[Any], ctx: DocContext | None = None) -> list[str]:
    """What keeps ``tool``'s doc from being complete and true (empty when it is): no example, an example the
    argument model refuses, no error of its own, or an Arguments section that is not exactly the schema's
    properties (the drift the docs must never have)."""
    problems = []
    if not tool.examples:
        problems.append("no example")
    for i, ex in enumerate(tool.examples, 1):
        try:
            tool.args.model_validate(ex.args)
        except ValidationError as exc:
            problems.append(f"example {i} does not validate: {exc.errors()[0]['msg']}")
    if not tool.errors:
        problems.append("no error of its own (what can go wrong, and what to do)")
    listed = documented_arguments(render_doc(tool, ctx or DocContext()))
    schema = list(tool.parameters().get("properties", {}))
    if listed != schema:
        problems.append(f"its doc lists the arguments {listed}, the schema has {schema}")
    return problems


def documented_arguments(doc: str) -> list[str]:
    """The top-level argument names a doc's Arguments section lists, in order."""
    section = doc.split("\n## Arguments\n", 1)[-1].split("\n## ", 1)[0]
    return [line[3:].split("`", 1)[0] for line in section.splitlines() if line.startswith("- `")]


def render_all(tools: Iterable[Tool[Any]], ctx: DocContext) -> dict[str, str]:
    """Every file of the docs folder: name -> content."""
    listed = list(tools)
    files = {t.doc_name: render_doc(t, ctx) for t in listed}
    files[INDEX] = render_index(listed, ctx)
    return files
