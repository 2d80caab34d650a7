"""How the agent's turns and tool events read: a reply, a call, a failed result, a denied call, the sandbox."""

from __future__ import annotations

import re

from console.engine import events as ev
from console.engine.job_files import one_line
from console.view.present.args import tool_args
from console.view.present.words import (
    Presented,
    cost,
    flat,
    reply_text,
    tokens,
)


def _tool_called(e: ev.ToolCalled) -> Presented:
    return Presented("▸", "tool", "info", f"{one_line(e.tool, 60)}({tool_args(e.tool, e.arguments)})",
                     source="agent")


def _tool_result(e: ev.ToolResult) -> Presented | None:
    if e.ok:
        return None
    first = next((ln.strip() for ln in e.content.splitlines() if ln.strip()), "(no message)")
    first = first.removeprefix(f"{e.tool} failed: ")  # the result's own words for the agent; the line says it once
    # An MCP tool's: "mcp__s__t is unavailable: why" (console.engine.tools.mcp_tools): its name said once too.
    unavailable = f"{e.tool} is unavailable: "
    first = f"unavailable: {first.removeprefix(unavailable)}" if first.startswith(unavailable) else first
    if re.fullmatch(r"exit code -?\d+", first):
        # A command's status line says only its code: the line adds why it failed ("✗ setup failed: exit code 2"
        # told the operator nothing): the harness's note that failed it (a command that exited 0 but left the
        # folder past max_job_mb), else the output's last line, where a program says why.
        rest = [ln.strip() for ln in e.content.splitlines()[1:] if ln.strip() and ln.strip() != "(no output)"]
        notes = [ln for ln in rest if ln.startswith("[") and ln.endswith("]")]  # the harness's (commands.py)
        failing = [ln[1:-1] for ln in notes if "the call failed" in ln or "counts as over max_job_mb" in ln]
        said = failing or [ln for ln in rest if ln not in notes]
        if said:
            first = f"{first}: {said[-1]}"
    took = f" ({e.duration_ms / 1000:.1f} s)" if e.duration_ms >= 1000 else ""
    return Presented("✗", "tool-failed", "caution", f"{one_line(e.tool, 60)} failed: {flat(first, 160)}{took}",
                     source=f"tool {one_line(e.tool, 60)}")


def _tool_denied(e: ev.ToolDenied) -> Presented:
    failed = f" (the policy failed: {flat(e.error, 120)})" if e.error else ""
    return Presented("⊗", "denied", "warning", f"denied {one_line(e.tool, 60)} by {one_line(e.policy, 60)}: "
                                                f"{flat(e.reason)}{failed}", source=one_line(e.policy, 60))


def _reply(e: ev.AssistantMessage) -> Presented | None:
    said = reply_text(e.text)
    return Presented("»", "reply", "info", said, source="agent") if said else None


SANDBOX_SEVERITY = {"confined": "info", "unconfined": "warning", "refused": "error"}


def _command_sandbox(e: ev.CommandSandbox) -> Presented:
    """The run's header for its commands: its summary, and the engine's paragraph under it, a clause a line (a
    log of a version before the summary: the paragraph as the line)."""
    severity = SANDBOX_SEVERITY.get(e.mode, "warning")
    if not e.summary:
        return Presented("▣", "sandbox", severity, flat(e.text, 0) or f"commands: {one_line(e.mode, 40)}",
                         source="sandbox")
    return Presented("▣", "sandbox", severity, flat(e.summary, 0), source="sandbox",
                     lines=tuple(flat(c, 0) for c in clauses(e.text)))


def clauses(text: str) -> list[str]:
    """The paragraph's clauses: split at "; " and ": they see " outside parentheses, the bounds on their own."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth = max(0, depth + (ch == "(") - (ch == ")"))  # a stray ")" in a path never stops the split
        if depth == 0 and text.startswith("; ", i):
            out.append(text[start:i])
            start = i + 2
    out.append(text[start:])
    _head, _, rest = out[0].partition(": they see ")
    if rest:
        out[0:1] = [f"they see {rest}"]
    last, sep, bounds = out[-1].partition(". Bounds: ")
    if sep:
        out[-1:] = [last, f"bounds: {bounds}"]
    return [c.strip() for c in out if c.strip()]


MCP_SEVERITY = {"starting": "info", "ready": "info", "restarted": "caution", "unavailable": "warning"}


def mcp_tools_text(e: ev.McpServerEvent) -> str:
    """Its tools as a view lists them: their own names (the mcp__SERVER__ prefix said once, by the server's name)."""
    if not e.known:
        return "its tools are not known (job.toml names none in tools): none offered"
    if not e.tools:
        return "no tools offered"
    prefix = f"mcp__{e.server}__"
    return f"{len(e.tools)} tool{'s' if len(e.tools) != 1 else ''}: " + ", ".join(
        one_line(t.removeprefix(prefix), 40) for t in e.tools)


MAY_WORDS = {"sampling": "may sample the run's model", "elicitation": "may ask you questions"}


def mcp_may(e: ev.McpServerEvent) -> str:
    """What the operator's config lets the server ask of the run, in words ("" for nothing)."""
    return ", ".join(MAY_WORDS.get(k, one_line(k, 20)) for k in e.may)


def mcp_confinement(e: ev.McpServerEvent) -> str:
    if not e.confined:
        return "not running"
    return e.confined if e.confined.startswith("UNCONFINED") else f"confined by {e.confined}"


def _mcp_server(e: ev.McpServerEvent) -> Presented:
    """A server of the run and its state: the run's header at the start, a line at each change."""
    severity = MCP_SEVERITY.get(e.state, "warning")
    if e.state == "ready" and e.confined.startswith("UNCONFINED"):
        severity = "warning"
    name = one_line(e.server, 40)
    told = {"unavailable": "its tools answer that it is unavailable" if e.tools else "",
            "restarted": "restarted once: another exit makes it unavailable"}.get(e.state, "")
    calls = f" · after {e.calls} call{'s' if e.calls != 1 else ''} ({e.errors} failed)" if e.calls else ""
    may = f" · {mcp_may(e)}" if e.may else ""
    return Presented("◈", "mcp", severity, f"MCP server {name} {e.state}: {mcp_tools_text(e)} · "
                                           f"{mcp_confinement(e)}{may}{calls}", told, f"mcp {name}",
                     lines=(flat(e.why, 0),) if e.why else ())


def _mcp_elicited(e: ev.McpElicited) -> Presented:
    """A server's question to the operator: refused (why), or how it ended (the fields answered, never their values)."""
    name = one_line(e.server, 40)
    tool = f" during {one_line(e.tool, 60)}" if e.tool else ""
    if e.refused:
        return Presented("◈", "mcp", "caution", f"MCP server {name} asked the operator a question{tool}: refused",
                         one_line(e.refused, 300), f"mcp {name}")
    what = {"accept": "answered" + (f" ({', '.join(one_line(f, 64) for f in e.fields[:16])})" if e.fields else ""),
            "decline": "declined", "cancel": "cancelled"}.get(e.action, one_line(e.action, 20))
    severity = "info" if e.action == "accept" else "caution"
    return Presented("◈", "mcp", severity, f"MCP server {name}'s question {one_line(e.question, 20)}{tool}: {what}",
                     f"by {one_line(e.by, 200)} after {e.waited_s:.0f} s" if e.by else "", f"mcp {name}")


def _mcp_sampled(e: ev.McpSampled) -> Presented:
    """A server's sampling request: answered by the run's model (its tokens and cost), or refused (why)."""
    name = one_line(e.server, 40)
    tool = f" during {one_line(e.tool, 60)}" if e.tool else ""
    if e.refused:
        return Presented("◈", "mcp", "caution", f"MCP server {name} asked the run's model (sampling){tool}: refused",
                         one_line(e.refused, 300), f"mcp {name}")
    price = f", {cost(e.cost_usd)}" if e.cost_usd is not None else ""
    return Presented("◈", "mcp", "info", f"MCP server {name} sampled the run's model{tool}: {tokens(e.input_tokens)} "
                                         f"in, {tokens(e.output_tokens)} out (at most {e.max_tokens:,}){price}",
                     one_line(e.note, 300), f"mcp {name}")
