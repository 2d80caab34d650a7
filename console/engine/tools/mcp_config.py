"""The ``[[mcp]]`` tables of job.toml, checked: the Model Context Protocol servers whose tools a job offers its agent.

Apart from :mod:`.mcp_tools` (the tools made of a live server's list) so that checking a job loads only pydantic.

A server is declared by a name, how to start it (a stdio ``command`` argv, never a shell) and which of its tools to
offer (``tools``; all by default). Its environment is given by *names only* (``env``): their values come from the
operator's environment when the run starts, never from job.toml (a job folder may come from anyone, and its file is
shown and copied). ``required``: the run refuses to start when this server does not. A streamable-HTTP ``url``:
the server runs elsewhere and the engine's process reaches it, only at a URL the operator's ``[mcp] urls`` allows.

The operator's config may declare servers too (``[[mcp.servers]]``, the same keys, and what only the operator may
set: ``network`` for a stdio server, the credentials of an HTTP one, ``bearer_token_env_var`` and
``env_http_headers``, their values read from the operator's environment by name). A job uses one by its name alone
(``[[mcp]] name = "github"``, narrowing ``tools`` or making it ``required`` at most): it cannot redefine it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated
from urllib.parse import unquote, urlsplit

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
_HEADER_NAME = re.compile(r"[A-Za-z0-9-]{1,64}")
# What a reference to an operator's server (a name alone) may still say in job.toml.
_REFERENCE_KEYS = {"name", "tools", "required"}
# What only the operator's config may set (a job's [[mcp]] that sets one is refused).
OPERATOR_KEYS = ("network", "bearer_token_env_var", "env_http_headers", "sampling", "sampling_max_tokens",
                 "sampling_per_call", "elicitation", "elicitation_timeout", "elicitation_per_call")
# The most a server's one sampling request may be given (output tokens), and the most requests one tool call may
# make, whatever the operator writes: a cap the operator can lower, never a door left open.
MAX_SAMPLING_TOKENS = 16_384
MAX_SAMPLING_PER_CALL = 32
# The longest a server's question may wait for the operator (seconds: a day), and the most questions of one call.
MAX_ELICITATION_TIMEOUT = 86_400.0
MAX_ELICITATION_PER_CALL = 8


class McpServerConfig(StrictSection):
    """One ``[[mcp]]`` table of job.toml."""

    name: str
    command: list[str] | None = Field(default=None, min_length=1, max_length=MAX_ARGV)
    # A streamable-HTTP server (http:// or https://), reached by the engine's process at an allowed URL only.
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
    # The operator's config only ([[mcp.servers]]): the network for this stdio server (as [sandbox_limits] network
    # gives it to commands), and the names of the operator's environment variables whose values are an HTTP
    # server's credentials (Authorization: Bearer VALUE; other headers by name). Never in job.toml.
    network: bool = False
    bearer_token_env_var: str | None = None
    env_http_headers: dict[str, str] = Field(default_factory=dict, max_length=MAX_ENV)
    # The operator's config only: whether the server's sampling requests (sampling/createMessage) are answered by
    # the run's own model (text only, none of the run's context, each within ``sampling_max_tokens`` output tokens
    # and counted in the run's spend and budget; at most ``sampling_per_call`` of them during one tool call). Off:
    # refused (the client does not advertise it).
    sampling: bool = False
    sampling_max_tokens: int = Field(default=1024, ge=1, le=MAX_SAMPLING_TOKENS)
    sampling_per_call: int = Field(default=4, ge=1, le=MAX_SAMPLING_PER_CALL)
    # The operator's config only: whether the server may ask the operator a question during a call (elicitation,
    # form mode: a flat form; the run's need until answered with `agent-console answer`), how long each question
    # waits for the answer (seconds; the call waits that much longer; then it is cancelled), and how many one call
    # may ask. Off: refused (the client does not advertise it).
    elicitation: bool = False
    elicitation_timeout: float = Field(default=900.0, ge=1, le=MAX_ELICITATION_TIMEOUT)
    elicitation_per_call: int = Field(default=2, ge=1, le=MAX_ELICITATION_PER_CALL)

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

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and (why := url_problem(value)):
            raise ValueError(why)
        return value

    @field_validator("bearer_token_env_var")
    @classmethod
    def _bearer(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.fullmatch(value):
            raise ValueError("bearer_token_env_var names a variable of the operator's environment (capital letters, "
                             "digits and '_'), never the token itself")
        return value

    @field_validator("env_http_headers")
    @classmethod
    def _headers(cls, value: dict[str, str]) -> dict[str, str]:
        for header, name in value.items():
            if not _HEADER_NAME.fullmatch(header):
                raise ValueError(f"'{one_line(header, 60)}' is not a header name (letters, digits, '-')")
            if not _ENV_NAME.fullmatch(name):
                raise ValueError(f"header {header}: its value names a variable of the operator's environment "
                                 "(capital letters, digits and '_'), never the credential itself")
        return value

    @model_validator(mode="after")
    def _one_way_in(self) -> McpServerConfig:
        if self.url is not None and self.command is not None:
            raise ValueError("a server has a command (stdio) or a url (streamable HTTP), not both")
        if self.url is not None and (self.env or self.network):
            raise ValueError("env and network are for a stdio server (a command); an HTTP server runs elsewhere")
        if self.url is None and (self.bearer_token_env_var or self.env_http_headers):
            raise ValueError("bearer_token_env_var and env_http_headers are for an HTTP server (a url)")
        return self

    @property
    def is_reference(self) -> bool:
        """A name alone in job.toml: the operator's server of that name (resolved at the run's start)."""
        return self.command is None and self.url is None


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be an MCP server's address (one line), or None."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises on a port that is not a number)
    except ValueError:
        return f"'{one_line(url, 120)}' is not a URL"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"'{one_line(url, 120)}' is not an http:// or https:// URL"
    if parts.username is not None or parts.password is not None:
        return ("a server's URL holds no user or password (credentials come from the operator's environment: "
                "bearer_token_env_var, env_http_headers in the operator's [[mcp.servers]])")
    if parts.fragment:
        return f"'{one_line(url, 120)}' has a fragment (#...), which an HTTP request does not carry"
    if any(seg in (".", "..") for seg in unquote(parts.path).split("/")):
        return f"'{one_line(url, 120)}' has a '.' or '..' in its path (write the path it means)"
    return None


def _origin_path(url: str) -> tuple[str, str, int, str]:
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, (parts.hostname or "").lower(), port, parts.path or "/"


def url_allowed(url: str, allowed: Sequence[str]) -> bool:
    """Whether ``url`` is at one of the ``allowed`` prefixes: the same scheme, host and port, and a path at or under
    the prefix's (``https://h/mcp/`` allows ``https://h/mcp/x``, not ``https://h/mcpx``; ``https://h`` allows all of
    that origin). Compared parsed, never as strings: ``https://h.evil.org`` is not under ``https://h``."""
    if url_problem(url):
        return False
    scheme, host, port, path = _origin_path(url)
    for prefix in allowed:
        if url_problem(prefix):
            continue
        p_scheme, p_host, p_port, p_path = _origin_path(prefix)
        if (scheme, host, port) != (p_scheme, p_host, p_port):
            continue
        if p_path.endswith("/") and (path.startswith(p_path) or path + "/" == p_path):
            return True
        if path == p_path or path.startswith(p_path + "/"):
            return True
    return False


def shown_url(url: str) -> str:
    """``url`` as a line may show it: scheme, host, port and path (a query may carry a credential)."""
    parts = urlsplit(url)
    return one_line(f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}", 200)


def _unique_names(servers: list[McpServerConfig]) -> list[McpServerConfig]:
    seen: set[str] = set()
    for s in servers:
        if s.name.casefold() in seen:
            raise ValueError(f"two servers are named '{s.name}'; each needs a name of its own")
        seen.add(s.name.casefold())
    return servers


def _jobs_own(servers: list[McpServerConfig]) -> list[McpServerConfig]:
    """What job.toml may not say: what only the operator sets, and a reference's redefinition."""
    for s in servers:
        if set_here := [k for k in OPERATOR_KEYS if k in s.model_fields_set]:
            raise ValueError(f"server {s.name}: {', '.join(set_here)} is set only by the operator's config "
                             "([[mcp.servers]] in the config file), never by job.toml")
        if s.is_reference and (extra := sorted(s.model_fields_set - _REFERENCE_KEYS)):
            raise ValueError(f"server {s.name}: {', '.join(extra)} without a command or a url; a server of the "
                             "operator's config is named alone (tools and required at most), a job's own needs "
                             "a command or a url")
    return servers


# The type of job.toml's ``mcp`` key: at most MAX_SERVERS, names unique (an error at key 'mcp').
McpServers = Annotated[list[McpServerConfig], Field(max_length=MAX_SERVERS), AfterValidator(_unique_names),
                       AfterValidator(_jobs_own)]


def _operators(servers: list[McpServerConfig]) -> list[McpServerConfig]:
    for s in servers:
        if s.is_reference:
            raise ValueError(f"server {s.name}: a server of the config needs a command (stdio) or a url (HTTP)")
    return servers


class McpCaps(StrictSection):
    """The config file's ``[mcp]``: what any job's ``[[mcp]]`` may declare (as ``[sandbox_limits]`` bounds commands).

    ``allow``: whether jobs may declare servers at all. ``commands``: the programs (a server's ``command[0]``,
    exactly as written) a job may start as a server; unset, any (each runs confined as a command does). ``urls``:
    where a job's HTTP server may be (prefixes: ``https://mcp.example.org/``); none by default. ``servers``: the
    operator's own servers ([[mcp.servers]]), which a job uses by name; their commands and URLs are the operator's,
    so neither list bounds them."""

    allow: bool = True
    commands: list[str] | None = Field(default=None, max_length=256)
    # The share of the context window the MCP tools' schemas may take; past it they are found and loaded through
    # the mcp_tool_search tool instead of all offered at once (console.engine.tools.tool_search).
    tool_search_share: float = Field(default=0.10, gt=0, le=1)
    urls: list[str] = Field(default_factory=list, max_length=256)
    # The names of the operator's environment variables a job's own server may be given (its ``env``): none by
    # default. A job folder may come from anyone: its job.toml must not pull the operator's API keys or tokens into
    # a program it chose (whose results reach the model, and whose files the job folder keeps).
    env: list[str] = Field(default_factory=list, max_length=256)
    servers: Annotated[list[McpServerConfig], Field(max_length=64), AfterValidator(_unique_names),
                       AfterValidator(_operators)] = Field(default_factory=list)

    @field_validator("urls")
    @classmethod
    def _urls(cls, value: list[str]) -> list[str]:
        for i, url in enumerate(value):
            if why := url_problem(url):
                raise ValueError(f"entry {i}: {why}")
        return value

    def server(self, name: str) -> McpServerConfig | None:
        return next((s for s in self.servers if s.name.casefold() == name.casefold()), None)


def caps_problem(servers: list[McpServerConfig], caps: McpCaps) -> str | None:
    """Why the operator's ``[mcp]`` refuses these servers (one line naming the key), or None."""
    if servers and not caps.allow:
        return (f"key 'mcp': the operator's config does not allow MCP servers (allow = false under [mcp] in the config "
                f"file); remove the [[mcp]] tables ({', '.join(s.name for s in servers)})")
    for i, s in enumerate(servers):
        own = caps.server(s.name)
        if s.is_reference:
            if own is None:
                return (f"key 'mcp.{i}': no server named '{s.name}' in the operator's config ([[mcp.servers]] in the "
                        "config file); give it a command or a url, or name one the config declares")
            continue
        if own is not None:
            return (f"key 'mcp.{i}': '{s.name}' is a server of the operator's config ([[mcp.servers]]), which a job "
                    "cannot redefine; name it alone (name, tools, required), or give yours another name")
        if s.url is not None and not url_allowed(s.url, caps.urls):
            return (f"key 'mcp.{i}.url': {shown_url(s.url)} is not at a URL the operator's config allows (urls under "
                    "[mcp] in the config file)")
        if refused := [name for name in s.env if name not in caps.env]:
            return (f"key 'mcp.{i}.env': the operator's config does not let a job's server have "
                    f"{', '.join(refused)} (env under [mcp] in the config file names the variables a job's server may "
                    "be given); remove it from env, or add it there if this job is yours")
        if s.command is not None and caps.commands is not None and s.command[0] not in caps.commands:
            return (f"key 'mcp.{i}.command': '{one_line(s.command[0], 120)}' is not one of the MCP server programs the "
                    "operator's config allows (commands under [mcp] in the config file)")
    return None


def resolve(servers: list[McpServerConfig], caps: McpCaps) -> list[McpServerConfig]:
    """The servers to start: a job's own as declared, a reference as the operator's config declares it (its tools
    narrowed by the job's, required if either says so). Call after :func:`caps_problem` said None."""
    out: list[McpServerConfig] = []
    for s in servers:
        own = caps.server(s.name) if s.is_reference else None
        if own is None:
            out.append(s)
            continue
        tools = own.tools
        if s.tools is not None:
            tools = [t for t in s.tools if own.tools is None or t in own.tools]
        out.append(own.model_copy(update={"name": s.name, "tools": tools, "required": own.required or s.required}))
    return out


def allowed_urls(config: McpServerConfig, caps: McpCaps) -> tuple[str, ...]:
    """Where a request to ``config``'s server may go: the operator's ``urls``, and an operator's server's own URL."""
    own = caps.server(config.name)
    mine = (own.url,) if own is not None and own.url is not None and own.url == config.url else ()
    return (*caps.urls, *mine)


def mcp_tool_declared(name: str, servers: list[McpServerConfig]) -> bool:
    """Whether ``name`` is ``mcp__SERVER__TOOL`` of one of ``servers`` (and one its ``tools`` offers, when it names
    them): a tool a guardrail may name before the server has started (checked again once it has)."""
    prefix, _, rest = name.partition("__")
    server, _, tool = rest.partition("__")
    if prefix != "mcp" or not tool:
        return False
    found = next((s for s in servers if s.name == server), None)
    return found is not None and (found.tools is None or tool in found.tools)
