"""The ``[[mcp]]`` tables of job.toml, checked: the Model Context Protocol servers whose tools a job offers its agent.

Apart from :mod:`.mcp_tools` (the tools made of a live server's list) so that checking a job loads only pydantic.

A server is declared by a name, how to start it (a stdio ``command`` argv, never a shell) and which of its tools to
offer (``tools``; all by default). Its environment is given by *names only* (``env``): their values come from the
operator's environment when the run starts, never from job.toml (a job folder may come from anyone, and its file is
shown and copied). ``required``: the run refuses to start when this server does not. A streamable-HTTP ``url`` is
a later step: a job that declares one is refused with one line (never half-honoured).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field, field_validator, model_validator

from console.engine.job import StrictSection, one_line

MAX_SERVERS = 16
MAX_ARGV = 256
MAX_ARG_CHARS = 4096
MAX_OFFERED = 256
MAX_ENV = 32
MAX_TIMEOUT = 3600.0
MAX_OUTPUT_KB = 1024

# No '_' in a server's name: the tool's name ``mcp__SERVER__TOOL`` is then read back unambiguously. 20 characters
# leave a tool's own name 39 within the 64 both providers accept (OpenAI: ^[a-zA-Z0-9_-]{1,64}$; Anthropic the same).
SERVER_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9-]{0,19}")
TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,127}")


class McpServerConfig(StrictSection):
    """One ``[[mcp]]`` table of job.toml."""

    name: str
    command: list[str] | None = Field(default=None, min_length=1, max_length=MAX_ARGV)
    # A streamable-HTTP server: not built yet; refused at the check (see _one_way_in).
    url: str | None = Field(default=None, max_length=2048)
    # The server's tools to offer, by their own names; None: all it lists.
    tools: list[str] | None = Field(default=None, max_length=MAX_OFFERED)
    # Names of the operator's environment variables the server gets (their values are never in job.toml).
    env: list[str] = Field(default_factory=list, max_length=MAX_ENV)
    # The run refuses to start when a required server does not.
    required: bool = False
    # The most one call may take (seconds), and the most of its result kept (KB).
    timeout: float = Field(default=60.0, gt=0, le=MAX_TIMEOUT)
    max_output_kb: int = Field(default=64, ge=1, le=MAX_OUTPUT_KB)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not SERVER_NAME.fullmatch(value):
            raise ValueError("a server's name is 1 to 20 letters, digits or '-', starting with a letter or digit "
                             "(e.g. time)")
        return value

    @field_validator("command")
    @classmethod
    def _command(cls, value: list[str] | None) -> list[str] | None:
        for i, arg in enumerate(value or ()):
            if not arg or "\x00" in arg or len(arg) > MAX_ARG_CHARS:
                raise ValueError(f"argument {i} is empty, holds a NUL or is longer than {MAX_ARG_CHARS} characters; "
                                 "the command is an argv list, e.g. [\"mcp-server-time\"]")
        return value

    @field_validator("tools")
    @classmethod
    def _tools(cls, value: list[str] | None) -> list[str] | None:
        for i, name in enumerate(value or ()):
            if not TOOL_NAME.fullmatch(name):
                raise ValueError(f"entry {i} ('{one_line(name, 60)}') is not a tool name (letters, digits, '_', '-')")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: list[str]) -> list[str]:
        for i, name in enumerate(value):
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"entry {i} ('{one_line(name, 60)}') is not a variable name (capital letters, "
                                 "digits and '_'); env lists names only, the values come from the operator's "
                                 "environment")
        return value

    @model_validator(mode="after")
    def _one_way_in(self) -> McpServerConfig:
        if self.url is not None:
            raise ValueError("a streamable-HTTP server (url) is not supported yet; declare a stdio command instead")
        if self.command is None:
            raise ValueError("a server needs a command (its argv, e.g. [\"mcp-server-time\"])")
        return self


def _unique_names(servers: list[McpServerConfig]) -> list[McpServerConfig]:
    seen: set[str] = set()
    for s in servers:
        if s.name.casefold() in seen:
            raise ValueError(f"two servers are named '{s.name}'; each needs a name of its own")
        seen.add(s.name.casefold())
    return servers


# The type of job.toml's ``mcp`` key: at most MAX_SERVERS, names unique (an error at key 'mcp').
McpServers = Annotated[list[McpServerConfig], Field(max_length=MAX_SERVERS), AfterValidator(_unique_names)]


class McpCaps(StrictSection):
    """The config file's ``[mcp]``: what any job's ``[[mcp]]`` may declare (as ``[sandbox_limits]`` bounds commands).

    ``allow``: whether jobs may declare servers at all. ``commands``: the programs (a server's ``command[0]``,
    exactly as written) a job may start as a server; unset, any (each runs confined as a command does)."""

    allow: bool = True
    commands: list[str] | None = Field(default=None, max_length=256)


def caps_problem(servers: list[McpServerConfig], caps: McpCaps) -> str | None:
    """Why the operator's ``[mcp]`` refuses these servers (one line naming the key), or None."""
    if servers and not caps.allow:
        return (f"key 'mcp': the operator's config does not allow MCP servers (allow = false under [mcp] in the config "
                f"file); remove the [[mcp]] tables ({', '.join(s.name for s in servers)})")
    if caps.commands is not None:
        for i, s in enumerate(servers):
            program = (s.command or [""])[0]
            if program not in caps.commands:
                return (f"key 'mcp.{i}.command': '{one_line(program, 120)}' is not one of the MCP server programs the "
                        "operator's config allows (commands under [mcp] in the config file)")
    return None


def mcp_tool_declared(name: str, servers: list[McpServerConfig]) -> bool:
    """Whether ``name`` is ``mcp__SERVER__TOOL`` of one of ``servers`` (and one its ``tools`` offers, when it names
    them): a tool a guardrail may name before the server has started (checked again once it has)."""
    prefix, _, rest = name.partition("__")
    server, _, tool = rest.partition("__")
    if prefix != "mcp" or not tool:
        return False
    found = next((s for s in servers if s.name == server), None)
    return found is not None and (found.tools is None or tool in found.tools)
