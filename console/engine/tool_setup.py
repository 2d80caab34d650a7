"""What a run sets up for its tools: their full docs in the job folder (layer 3), and the header of the job's
declared commands (the sandbox they run in and their bounds)."""

from __future__ import annotations

from typing import Literal

from console.engine import events as ev
from console.engine.job_files import JobPaths
from console.engine.run_settings import RunSettings
from console.engine.runtime import Runtime
from console.engine.sandbox import Sandbox
from console.engine.tools import ToolRegistry, seccomp
from console.engine.tools.cgroups import find_cgroups, sweep_stale
from console.engine.tools.confine import Bwrap, find_bwrap
from console.engine.tools.docs import DocContext, render_all
from console.engine.tools.docs_folder import write_docs
from console.engine.tools.limits import describe_world, summarize_world


def write_tool_docs(paths: JobPaths, settings: RunSettings, registry: ToolRegistry, sandbox: Sandbox, rt: Runtime,
                    events: ev.EventStream) -> None:
    """The tools' full docs (layer 3), written into the job folder at each session start from the tools'
    definitions (console.engine.tools.docs_folder says where and how); the file tools and commands may only
    read them, the prompt's tool guide points to them, the workspace summary names their folder."""
    st = settings
    tools = registry.tools()

    def render(folder: str) -> dict[str, str]:
        return render_all(tools, DocContext(folder, max_write_mb=st.max_write_mb, max_job_mb=st.max_job_mb,
                                            commands_confined=not st.commands.unconfined))

    result = write_docs(paths.root, render)
    sandbox.keep_folder(result.folder)
    registry.docs_folder = rt.workspace.docs_folder = result.folder
    if result.problem:
        events.emit(ev.ErrorEvent, message=result.problem, where="tool docs", recoverable=True)


def announce_commands(settings: RunSettings, rt: Runtime, events: ev.EventStream) -> None:
    """The run's header for its commands: what they see and their bounds (a ``command_sandbox`` event), and what
    the guardrails' status says of them."""
    world = settings.commands
    sweep_stale()  # cgroups a killed run left behind: what still runs in them is killed
    cg = find_cgroups()
    bounds_by = cg.label if cg is not None else "rlimits"
    names = [t.name for t in settings.tools]
    limits = {k: float(v) for k, v in vars(world.limits).items()} | {"max_job_mb": float(world.max_job_mb)}
    memory_by: Literal["cgroup", "rlimit"] = "cgroup" if cg is not None else "rlimit"
    if world.unconfined:
        mode, tool, text = "unconfined", "", describe_world(world, memory_by=memory_by)
    else:
        found = find_bwrap(writable=(str(rt.paths.root),), overlay=bool(world.read_only))
        if isinstance(found, Bwrap):
            mode, tool = "confined", found.label
            text = describe_world(world, tool=found.label, memory_by=memory_by,
                                  filtered=seccomp.program() is not None)
        else:
            mode, tool = "refused", found
            text = (f"commands ({', '.join(names)}) are refused: no sandbox works here ({found}); each call "
                    "tries again. Install bubblewrap, or run --unconfined to run them without one.")
    rt.guards.report.command_tools = names
    rt.guards.report.confinement = {"confined": tool, "unconfined": "UNCONFINED (run --unconfined)",
                                    "refused": "refused: no sandbox works here"}[mode]
    summary = "" if mode == "refused" else summarize_world(world, tool=tool)  # a refusal's text is short
    events.emit(ev.CommandSandbox, mode=mode, tool=tool, bounds_by=bounds_by, network=world.network,
                read_only=list(world.read_only), limits=limits, commands=names, text=text, summary=summary)
