"""The rules the real APIs enforce on a request body, as pure functions: what the strict loopback refuses.

Two layers, both applied to every request:

1. Hand-written rules for what a type cannot say (a tool call answered by its result right after it, role
   order, cache breakpoints, ...). Each one names the real behaviour it models and quotes the real error text
   where it is known, so a refusal reads like the production error.
2. The SDKs' own published request types, ``openai.types.chat.completion_create_params.
   CompletionCreateParams{Streaming,NonStreaming}`` and ``anthropic.types.message_create_params.
   MessageCreateParams{Streaming,NonStreaming}`` (TypedDicts), compiled with ``pydantic.TypeAdapter``. Two
   changes make them as strict as the servers: ``Iterable[...]`` fields (which pydantic turns into lazy
   generators that would never be checked) are validated as lists, and unknown keys are refused at every level
   (the TypedDicts are total=False and pydantic ignores extra keys by default; the real APIs answer 400). If a
   future SDK's types cannot be compiled, :func:`published_types_status` says why and the hand rules carry on
   alone.

Sources, per rule, in the comments below. Shorthand used there:

- [oa-ref]  OpenAI API reference, Create chat completion: https://platform.openai.com/docs/api-reference/chat/create
- [oa-err]  error bodies the OpenAI API returns (quoted as recorded)
- [an-ref]  Anthropic Messages API reference: https://docs.anthropic.com/en/api/messages
- [an-tool] Anthropic tool use: https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/implement-tool-use
- [an-cache] Anthropic prompt caching: https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching
- [an-think] Anthropic extended thinking: https://docs.anthropic.com/en/docs/build-with-claude/extended-thinking
- [qwen]    Qwen 3.x chat templates (tokenizer_config.json ``chat_template``) as run by vLLM / llama.cpp /
            LM Studio, whose ``raise_exception(...)`` text reaches the client as the 400 message
- [vllm]    vLLM's OpenAI-compatible server (vllm/entrypoints/openai), which parses replayed tool-call
            arguments as JSON before rendering the template
"""

from __future__ import annotations

import functools
import json
import re
import typing
from typing import Any, Literal

OpenAIDialect = Literal["openai", "chat_template", "mistral_template"]
OPENAI: OpenAIDialect = "openai"
# An OpenAI-compatible local server that renders the request through the model's Jinja chat template (vLLM,
# llama.cpp's llama-server, LM Studio) for a Qwen 3.x-style template: stricter about message order and shape.
CHAT_TEMPLATE: OpenAIDialect = "chat_template"
# The same for a Mistral-family model (its template, or mistral_common's validator): strict user/assistant
# alternation, no user message right after tool results, text in every assistant message without tool calls.
MISTRAL_TEMPLATE: OpenAIDialect = "mistral_template"
OPENAI_DIALECTS: tuple[OpenAIDialect, ...] = (OPENAI, CHAT_TEMPLATE, MISTRAL_TEMPLATE)


class Invalid(Exception):
    """One reason a request is refused: ``param`` is the path of the offending field (OpenAI's ``param``),
    ``code`` OpenAI's error ``code`` when the real API sets one."""

    def __init__(self, param: str | None, message: str, *, code: str | None = None) -> None:
        super().__init__(param, message)
        self.param = param
        self.message = message
        self.code = code

    def __str__(self) -> str:
        return f"{self.param}: {self.message}" if self.param else self.message


TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
TOOL_USE_ID = re.compile(r"^[a-zA-Z0-9_-]+$")
OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool")
# Roles a Qwen-style chat template renders; anything else hits its `raise_exception('Unexpected message role.')`.
CHAT_TEMPLATE_ROLES = ("system", "user", "assistant", "tool")
# Content part types each OpenAI role accepts in the list form of `content`.
OPENAI_PARTS = {
    "system": {"text"},
    "developer": {"text"},
    "user": {"text", "image_url", "input_audio", "file"},
    "assistant": {"text", "refusal"},
    "tool": {"text"},
}
ANTHROPIC_BLOCKS = {
    "user": {"text", "image", "document", "tool_result", "search_result"},
    "assistant": {"text", "tool_use", "thinking", "redacted_thinking"},
}
MAX_CACHE_BREAKPOINTS = 4
MIN_THINKING_BUDGET = 1024
# OpenAI reasoning models (o-series, gpt-5 family) refuse the legacy `max_tokens`.
REASONING_MODEL = re.compile(r"^(o\d|gpt-5)")


def error_body(path: str, problem: Invalid, dialect: OpenAIDialect = OPENAI) -> dict[str, Any]:
    """The 400 body the real server sends for ``problem``, in the shape of the API behind ``path``."""
    if path.endswith("/messages"):
        return {"type": "error", "error": {"type": "invalid_request_error", "message": str(problem)}}
    if dialect != OPENAI:
        # vLLM's ErrorResponse (llama.cpp's differs only in field order): the template's message, code = status.
        return {"error": {"message": str(problem), "type": "BadRequestError", "param": problem.param, "code": 400}}
    return {"error": {"message": problem.message, "type": "invalid_request_error", "param": problem.param,
                      "code": problem.code}}


TokenLimit = Literal["max_tokens", "max_completion_tokens"]


def check_token_limit(body: Any, takes: TokenLimit | None) -> Invalid | None:
    """A deployment that takes one name of the output limit only, whatever the model is called (an Azure deployment
    is named by its owner): ``takes="max_completion_tokens"`` is Azure OpenAI's (and OpenAI's) reasoning models, o1,
    o3, o4-mini, gpt-5 (the body, param and code as recorded: openai-python and many client issues, e.g.
    langgenius/dify#9746); ``"max_tokens"`` an Azure deployment behind an older API version (openai-python#1724,
    BerriAI/litellm#8638: param and code null)."""
    if not isinstance(body, dict) or takes is None:
        return None
    if takes == "max_completion_tokens" and body.get("max_tokens") is not None:
        return Invalid("max_tokens", "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                                     "'max_completion_tokens' instead.", code="unsupported_parameter")
    if takes == "max_tokens" and "max_completion_tokens" in body:
        return Invalid(None, "Unrecognized request argument supplied: max_completion_tokens")
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _need(cond: bool, param: str | None, message: str, *, code: str | None = None) -> None:
    if not cond:
        raise Invalid(param, message, code=code)


def validate_openai(body: Any, dialect: OpenAIDialect = OPENAI) -> str | None:
    """Why the OpenAI Chat Completions API (or, with ``dialect="chat_template"`` or ``"mistral_template"``, a local
    server rendering a Qwen-style or a Mistral-family chat template) would refuse this body, or None if it would
    accept it."""
    problem = check_openai(body, dialect)
    return None if problem is None else str(problem)


def validate_anthropic(body: Any) -> str | None:
    """Why the Anthropic Messages API would refuse this body, or None if it would accept it."""
    problem = check_anthropic(body)
    return None if problem is None else str(problem)


def check_openai(body: Any, dialect: OpenAIDialect = OPENAI) -> Invalid | None:
    if dialect not in OPENAI_DIALECTS:
        raise ValueError(f"unknown OpenAI dialect {dialect!r}: one of {OPENAI_DIALECTS}")
    try:
        _openai(body, dialect)
        if dialect == CHAT_TEMPLATE:
            _chat_template(body)
        elif dialect == MISTRAL_TEMPLATE:
            from .mistral_rules import check_mistral  # a module of its own; it imports Invalid from here

            check_mistral(body)
            _replayed_arguments(body["messages"])
        # vLLM's request model ignores unknown fields (it logs them); OpenAI refuses them.
        _published(body, "openai", forbid_extra=dialect == OPENAI)
    except Invalid as problem:
        return problem
    return None


def check_anthropic(body: Any) -> Invalid | None:
    try:
        _anthropic(body)
        _published(body, "anthropic", forbid_extra=True)
    except Invalid as problem:
        return problem
    return None


# -- OpenAI Chat Completions ------------------------------------------------------------


def _openai(body: Any, dialect: OpenAIDialect) -> None:
    _need(isinstance(body, dict), None, "the request body must be a JSON object")
    if dialect == OPENAI:
        # [oa-err] {"message": "Unrecognized request argument supplied: foo", "param": null, "code": null}
        unknown = [k for k in body if k not in _openai_keys()]
        _need(not unknown, None, f"Unrecognized request argument supplied: {', '.join(unknown)}")
    _need(isinstance(body.get("model"), str) and body["model"] != "", "model", "you must provide a model parameter")
    messages = body.get("messages")
    _need(isinstance(messages, list), "messages", "Missing required parameter: 'messages'.")
    _need(len(messages) > 0, "messages", "[] is too short - 'messages'")
    for key in ("max_tokens", "max_completion_tokens"):
        if body.get(key) is not None:
            _need(_is_int(body[key]) and body[key] >= 1, key, f"Invalid '{key}': expected an integer >= 1.")
    if dialect == OPENAI:
        # Both limits at once is a 400; worded as OpenAI-compatible endpoints (Gemini's, GitHub Copilot's) answer it.
        _need(body.get("max_tokens") is None or body.get("max_completion_tokens") is None, "max_tokens",
              "max_tokens and max_completion_tokens cannot both be set")
        # [oa-ref] max_tokens "is not compatible with o-series models"; recorded body (param max_tokens,
        # code unsupported_parameter) from the o-series and gpt-5 family.
        _need(body.get("max_tokens") is None or not REASONING_MODEL.match(str(body.get("model"))), "max_tokens",
              "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' "
              "instead.", code="unsupported_parameter")
    if "stream" in body:
        _need(isinstance(body["stream"], bool), "stream", "Invalid type for 'stream': expected a boolean.")
    if body.get("stream_options") is not None:
        _need(body.get("stream") is True, "stream_options",
              "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
        _need(isinstance(body["stream_options"], dict), "stream_options", "expected an object.")
    _openai_tools(body)

    roles = OPENAI_ROLES if dialect == OPENAI else CHAT_TEMPLATE_ROLES
    pending: dict[str, bool] = {}  # tool_call ids of the open assistant block -> answered yet
    open_at = -1
    for i, msg in enumerate(messages):
        where = f"messages.[{i}]"
        _need(isinstance(msg, dict), where, "each message must be an object")
        role = msg.get("role")
        if dialect == CHAT_TEMPLATE:
            # [qwen] {%- else %}{{- raise_exception('Unexpected message role.') }}: no `developer`, no `function`.
            _need(role in roles, f"{where}.role", "Unexpected message role.")
        _need(role in roles, f"{where}.role",
              f"Invalid value: {role!r}. Supported values are: {', '.join(map(repr, roles))}.")
        # [oa-err] an assistant message with tool_calls must be followed by one tool message per call, before
        # any other message.
        missing = [cid for cid, answered in pending.items() if not answered]
        if role != "tool" and missing:
            raise Invalid(f"messages.[{open_at}].role",
                          "An assistant message with 'tool_calls' must be followed by tool messages responding to "
                          "each 'tool_call_id'. The following tool_call_ids did not have response messages: "
                          + ", ".join(missing))
        if role != "tool":
            pending = {}
        _openai_content(msg, where, role)
        if role == "tool":
            cid = msg.get("tool_call_id")
            _need(isinstance(cid, str) and cid != "", f"{where}.tool_call_id",
                  "Missing required parameter: 'tool_call_id'.")
            _need(pending.get(cid) is False, f"{where}.role",
                  "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with "
                  f"'tool_calls' (no open tool_call with id {cid!r}).")
            pending[cid] = True
        elif role == "assistant" and msg.get("tool_calls") is not None:
            pending = _openai_tool_calls(msg["tool_calls"], where)
            open_at = i
    missing = [cid for cid, answered in pending.items() if not answered]
    if missing:
        raise Invalid(f"messages.[{open_at}].role",
                      "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
                      "'tool_call_id'. The following tool_call_ids did not have response messages: "
                      + ", ".join(missing))


def _openai_content(msg: dict[str, Any], where: str, role: str) -> None:
    content = msg.get("content")
    if content is None:
        if role == "assistant":
            _need(bool(msg.get("tool_calls")) or msg.get("function_call") is not None, f"{where}.content",
                  "Invalid value for 'content': expected a string, got null.")
            return
        raise Invalid(f"{where}.content", "Invalid value for 'content': expected a string, got null.")
    if isinstance(content, str):
        return
    _need(isinstance(content, list), f"{where}.content",
          f"Invalid type for '{where}.content': expected one of a string or array of objects.")
    for j, part in enumerate(content):
        at = f"{where}.content.[{j}]"
        _need(isinstance(part, dict), at, "expected an object.")
        kind = part.get("type")
        _need(kind in OPENAI_PARTS[role], f"{at}.type",
              f"Invalid value: {kind!r}. Supported values are: {', '.join(sorted(OPENAI_PARTS[role]))}.")
        if kind == "text":
            _need(isinstance(part.get("text"), str), f"{at}.text", "Missing required parameter: 'text'.")


def _openai_tool_calls(calls: Any, where: str) -> dict[str, bool]:
    _need(isinstance(calls, list), f"{where}.tool_calls", "expected an array.")
    _need(len(calls) > 0, f"{where}.tool_calls", f"[] is too short - '{where}.tool_calls'")
    ids: dict[str, bool] = {}
    for k, call in enumerate(calls):
        at = f"{where}.tool_calls.[{k}]"
        _need(isinstance(call, dict), at, "expected an object.")
        cid = call.get("id")
        _need(isinstance(cid, str) and cid != "", f"{at}.id", "Missing required parameter: 'id'.")
        _need(cid not in ids, f"{at}.id", f"Duplicate tool_call id {cid!r} in one assistant message.")
        _need(call.get("type") == "function", f"{at}.type", f"Invalid value: {call.get('type')!r}. "
              "Supported values are: 'function'.")
        fn = call.get("function")
        _need(isinstance(fn, dict), f"{at}.function", "Missing required parameter: 'function'.")
        _need(isinstance(fn.get("name"), str) and fn["name"] != "", f"{at}.function.name",
              "Missing required parameter: 'name'.")
        _need(isinstance(fn.get("arguments"), str), f"{at}.function.arguments",
              f"Invalid type for '{at}.function.arguments': expected a string.")
        ids[cid] = False
    return ids


def _openai_tools(body: dict[str, Any]) -> None:
    tools = body.get("tools")
    if tools is None:
        _need(body.get("tool_choice") is None, "tool_choice",
              "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.")
        return
    _need(isinstance(tools, list), "tools", "Invalid type for 'tools': expected an array.")
    # [oa-err] "[] is too short - 'tools'"; local servers refuse it too (see _chat_template).
    _need(len(tools) > 0, "tools", "[] is too short - 'tools'")
    names: set[str] = set()
    for k, tool in enumerate(tools):
        at = f"tools.[{k}]"
        _need(isinstance(tool, dict) and tool.get("type") == "function", f"{at}.type",
              "Invalid value. Supported values are: 'function'.")
        fn = tool.get("function")
        _need(isinstance(fn, dict), f"{at}.function", "Missing required parameter: 'function'.")
        name = fn.get("name")
        # [oa-ref] FunctionObject.name: "a-z, A-Z, 0-9, or contain underscores and dashes, with a maximum length
        # of 64".
        _need(isinstance(name, str) and TOOL_NAME.fullmatch(name) is not None, f"{at}.function.name",
              f"Invalid '{at}.function.name': string does not match pattern. Expected a string that matches the "
              "pattern '^[a-zA-Z0-9_-]{1,64}$'.")
        _need(name not in names, "tools", f"Duplicate function name {name!r}: tool names must be unique.")
        names.add(name)
        if fn.get("description") is not None:
            _need(isinstance(fn["description"], str), f"{at}.function.description", "expected a string.")
        if fn.get("parameters") is not None:
            params = fn["parameters"]
            _need(isinstance(params, dict) and params.get("type") == "object", f"{at}.function.parameters",
                  f"Invalid schema for function {name!r}: schema must be a JSON Schema of 'type: \"object\"', "
                  f"got 'type: \"{params.get('type') if isinstance(params, dict) else None}\"'.")


def _chat_template(body: dict[str, Any]) -> None:
    """The rules a local server adds when it renders the request through a Qwen 3.x-style chat template.

    Runs after the OpenAI rules (the dialect is a superset), so the body is already known to be well formed;
    `tools: []` is refused there ("[] is too short - 'tools'"), as compatible servers refuse it too. Both
    `max_tokens` and `max_completion_tokens` are accepted, together too ([vllm]: it uses whichever is set), and
    unknown fields are ignored rather than refused ([vllm]: its request model logs and drops them).
    """
    messages: list[dict[str, Any]] = body["messages"]
    for i, msg in enumerate(messages):
        # [qwen] {%- if message.role == "system" and not loop.first %}
        #            {{- raise_exception('System message must be at the beginning.') }}
        # Seen live from vLLM (400) and llama-server; Qwen3.5/3.6 community GGUFs ship the same guard.
        _need(msg["role"] != "system" or i == 0, f"messages.[{i}].role", "System message must be at the beginning.")
    _replayed_arguments(messages)
    # [qwen] the template looks back for the last user query: raise_exception('No user query found in messages.')
    _need(any(m["role"] == "user" for m in messages), "messages", "No user query found in messages.")


def _replayed_arguments(messages: list[dict[str, Any]]) -> None:
    for i, msg in enumerate(messages):
        for k, call in enumerate(msg.get("tool_calls") or []):
            # [vllm] replayed arguments are json.loads()-ed and rendered by the template as a mapping
            # (`tool_call.arguments|items`), so anything but a JSON object is a 400. Alibaba's DashScope answers
            # the same history with 'The "function.arguments" parameter ... must be in JSON format.'
            raw = call["function"]["arguments"]
            try:
                parsed = json.loads(raw)
            except ValueError as err:
                raise Invalid(f"messages.[{i}].tool_calls.[{k}].function.arguments",
                              f'The "function.arguments" parameter must be in JSON format ({err}): '
                              f"{raw[:60]!r}") from None
            _need(isinstance(parsed, dict), f"messages.[{i}].tool_calls.[{k}].function.arguments",
                  f'The "function.arguments" parameter must be a JSON object, got {type(parsed).__name__}')


@functools.cache
def _openai_keys() -> frozenset[str]:
    try:
        from openai.types.chat import completion_create_params as p

        return frozenset(typing.get_type_hints(p.CompletionCreateParamsStreaming))
    except Exception:  # pragma: no cover - an SDK without these types: the hand rules carry on alone
        return frozenset(("model", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens",
                          "tools", "tool_choice", "temperature", "top_p", "n", "stop", "seed", "user"))


# -- Anthropic Messages -------------------------------------------------------------------


def _anthropic(body: Any) -> None:
    _need(isinstance(body, dict), None, "the request body must be a JSON object")
    _need(isinstance(body.get("model"), str) and body["model"] != "", "model", "Field required")
    # [an-ref] max_tokens is required. The published type adds "Set to `0` to populate the prompt cache without
    # generating a response", so 0 is accepted and only a negative count refused.
    _need("max_tokens" in body, "max_tokens", "Field required")
    _need(_is_int(body["max_tokens"]) and body["max_tokens"] >= 0, "max_tokens",
          "Input should be a valid integer greater than or equal to 0")
    messages = body.get("messages")
    _need(isinstance(messages, list), "messages", "Field required")
    _need(len(messages) > 0, "messages", "at least one message is required")
    if "stream" in body:
        _need(isinstance(body["stream"], bool), "stream", "Input should be a valid boolean")
    thinking = _anthropic_thinking(body)
    breakpoints = _anthropic_system(body.get("system"))
    has_tools = _anthropic_tools(body)
    breakpoints += sum(1 for t in body.get("tools") or [] if isinstance(t, dict) and _has_breakpoint(t))
    # Top-level cache_control puts a breakpoint on the last cacheable block: it counts towards the four.
    breakpoints += _has_breakpoint(body)

    seen_ids: set[str] = set()
    open_ids: list[str] = []  # tool_use ids of the previous assistant message
    uses_tool_blocks = False
    prev_role: str | None = None
    for i, msg in enumerate(messages):
        where = f"messages.{i}"
        _need(isinstance(msg, dict), where, "Input should be an object")
        role = msg.get("role")
        # The published MessageParam has a `role: "system"` variant, but only "models that accept mid-conversation
        # system messages" take it (anthropic SDK, BetaSystemMessageParam); the loopback models one that does not,
        # which is what the Messages API answered for every model before.
        if role == "system":
            raise Invalid("messages", 'Unexpected role "system". The Messages API accepts a top-level `system` '
                                      'parameter, not "system" as an input message role.')
        _need(role in ("user", "assistant"), f"{where}.role", "Input should be 'user' or 'assistant'")
        if i == 0:
            # [an-ref] historical error text; requests are expected to open with the user's turn.
            _need(role == "user", "messages", 'first message must use the "user" role')
        # [an-ref] "Our models are trained to operate on alternating user and assistant conversational turns."
        # The current reference adds that consecutive same-role turns are combined; the loopback keeps the older,
        # stricter rule so an adapter that relies on the merge is caught.
        _need(role != prev_role, "messages",
              f'roles must alternate between "user" and "assistant", but found multiple "{role}" roles in a row')
        prev_role = role
        blocks = _anthropic_blocks(msg.get("content"), where, role, last=i == len(messages) - 1)
        breakpoints += sum(1 for b in blocks if _has_breakpoint(b))
        kinds = [b["type"] for b in blocks]
        uses_tool_blocks = uses_tool_blocks or "tool_use" in kinds or "tool_result" in kinds
        if role == "user":
            # [an-tool] "tool_result blocks must immediately follow their corresponding tool_use blocks" and "in
            # the user message containing tool results, the tool_result blocks must come FIRST in the content
            # array; any text must come AFTER all tool results."
            results = [b for b in blocks if b["type"] == "tool_result"]
            leading = 0
            while leading < len(kinds) and kinds[leading] == "tool_result":
                leading += 1
            for k, block in enumerate(results):
                uid = block["tool_use_id"]
                if uid not in open_ids:
                    raise Invalid(f"{where}.content.{kinds.index('tool_result') + k}",
                                  f"unexpected `tool_use_id` found in `tool_result` blocks: {uid}. Each `tool_result`"
                                  " block must have a corresponding `tool_use` block in the previous message.")
            answered = [b["tool_use_id"] for b in results]
            _need(len(set(answered)) == len(answered), where, "each `tool_use` may be answered only once "
                  "(duplicate `tool_use_id` in `tool_result` blocks)")
            if open_ids:
                _need(leading >= len(open_ids) and set(answered) == set(open_ids), where,
                      f"Did not find {len(open_ids)} `tool_result` block(s) at the beginning of this message. "
                      "Messages following `tool_use` blocks must begin with a matching number of `tool_result` "
                      "blocks.")
            open_ids = []
        else:
            open_ids = []
            for k, block in enumerate(blocks):
                if block["type"] != "tool_use":
                    continue
                uid = block["id"]
                _need(uid not in seen_ids, f"{where}.content.{k}", f"`tool_use` ids must be unique: {uid}")
                seen_ids.add(uid)
                open_ids.append(uid)
            if open_ids and i == len(messages) - 1:
                raise Invalid(where, f"`tool_use` ids were found without `tool_result` blocks immediately after: "
                                     f"{', '.join(open_ids)}. Each `tool_use` block must have a corresponding "
                                     "`tool_result` block in the next message.")
    # [an-tool] error text of the API for tool blocks in a request without `tools`.
    _need(not uses_tool_blocks or has_tools, None,
          "Requests which include `tool_use` or `tool_result` blocks must define tools.")
    # [an-cache] "You can define up to 4 cache breakpoints" (system, tools, messages and top-level together).
    _need(breakpoints <= MAX_CACHE_BREAKPOINTS, None,
          f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. Found {breakpoints}.")
    if thinking:
        _anthropic_thinking_turn(messages)


def _anthropic_thinking(body: dict[str, Any]) -> bool:
    """Checks the `thinking` config; True when thinking is on."""
    cfg = body.get("thinking")
    if not isinstance(cfg, dict) or cfg.get("type") in (None, "disabled"):
        return False
    if cfg.get("type") == "enabled":
        budget = cfg.get("budget_tokens")
        # [an-think] "budget_tokens ... Must be ≥1024 and less than max_tokens."
        _need(_is_int(budget) and budget >= MIN_THINKING_BUDGET, "thinking.enabled.budget_tokens",
              f"Input should be greater than or equal to {MIN_THINKING_BUDGET}")
        _need(budget < body["max_tokens"], None,
              "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at "
              "https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size")
    return True


def _anthropic_thinking_turn(messages: list[dict[str, Any]]) -> None:
    # [an-think] With thinking on, the assistant turn whose tool_use the last user message answers must be passed
    # back with its thinking block first; the API's error text, quoted.
    last = messages[-1]
    if last["role"] != "user" or len(messages) < 2:
        return
    content = last["content"]
    if isinstance(content, str) or not any(b.get("type") == "tool_result" for b in content):
        return
    prev = messages[-2]["content"]
    first = "text" if isinstance(prev, str) else (prev[0].get("type") if prev else None)
    _need(first in ("thinking", "redacted_thinking"), f"messages.{len(messages) - 2}.content.0.type",
          f"Expected `thinking` or `redacted_thinking`, but found `{first}`. When `thinking` is enabled, a final "
          "`assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and "
          "`tool_result` blocks). We recommend you include thinking blocks from previous turns. To avoid this "
          "requirement, disable `thinking`. Please consult our documentation at "
          "https://docs.claude.com/en/docs/build-with-claude/extended-thinking")


def _anthropic_text(block: dict[str, Any], at: str) -> None:
    text = block.get("text")
    _need(isinstance(text, str), f"{at}.text", "Field required")
    # The API's own texts for empty and blank text blocks.
    _need(text != "", at, "text content blocks must be non-empty")
    _need(text.strip() != "", at, "text content blocks must contain non-whitespace text")


def _has_breakpoint(block: dict[str, Any]) -> bool:
    return block.get("cache_control") is not None


def _cache_control(block: dict[str, Any], at: str) -> None:
    # `cache_control: null` is allowed (Optional in the published types) and is no breakpoint.
    if _has_breakpoint(block):
        cc = block["cache_control"]
        _need(isinstance(cc, dict) and cc.get("type") == "ephemeral", f"{at}.cache_control.type",
              "Input should be 'ephemeral'")


def _anthropic_system(system: Any) -> int:
    if system is None or isinstance(system, str):
        return 0
    _need(isinstance(system, list), "system", "Input should be a valid string or list of text blocks")
    for k, block in enumerate(system):
        at = f"system.{k}"
        _need(isinstance(block, dict) and block.get("type") == "text", f"{at}.type", "Input should be 'text'")
        _anthropic_text(block, at)
        _cache_control(block, at)
    return sum(1 for b in system if _has_breakpoint(b))


def _anthropic_tools(body: dict[str, Any]) -> bool:
    tools = body.get("tools")
    if tools is None:
        _need(body.get("tool_choice") is None, "tool_choice", "tool_choice may only be specified while providing "
                                                              "tools.")
        return False
    _need(isinstance(tools, list), "tools", "Input should be a valid list")
    names: set[str] = set()
    for k, tool in enumerate(tools):
        at = f"tools.{k}"
        _need(isinstance(tool, dict), at, "Input should be an object")
        name = tool.get("name")
        # [an-ref] Tool.name: "^[a-zA-Z0-9_-]{1,64}$" (custom tools); error text as the API's validator words it.
        _need(isinstance(name, str) and TOOL_NAME.fullmatch(name) is not None, f"{at}.custom.name",
              "String should match pattern '^[a-zA-Z0-9_-]{1,64}$'")
        _need(name not in names, "tools", f"Tool names must be unique. Duplicate: {name}")
        names.add(name)
        schema = tool.get("input_schema")
        _need(isinstance(schema, dict), f"{at}.custom.input_schema", "Field required")
        _need(schema.get("type") == "object", f"{at}.custom.input_schema.type", "Input should be 'object'")
        if tool.get("description") is not None:
            _need(isinstance(tool["description"], str), f"{at}.custom.description", "Input should be a valid string")
        _cache_control(tool, at)
    return bool(tools)


def _anthropic_blocks(content: Any, where: str, role: str, *, last: bool) -> list[dict[str, Any]]:
    """The message's content as a list of checked blocks (a string is one text block)."""
    if isinstance(content, str):
        # An empty final assistant message is allowed (a prefill); any other must say something.
        _need(content != "" or (last and role == "assistant"), where,
              "all messages must have non-empty content except for the optional final assistant message")
        if content == "":
            return []
        _need(content.strip() != "" or (last and role == "assistant"), f"{where}.content",
              "text content blocks must contain non-whitespace text")
        return [{"type": "text", "text": content}]
    _need(isinstance(content, list), f"{where}.content", "Input should be a valid string or list")
    _need(len(content) > 0 or (last and role == "assistant"), where,
          "all messages must have non-empty content except for the optional final assistant message")
    for k, block in enumerate(content):
        at = f"{where}.content.{k}"
        _need(isinstance(block, dict), at, "Input should be an object")
        kind = block.get("type")
        _need(kind in ANTHROPIC_BLOCKS[role], f"{at}.type",
              f"{kind!r} blocks are not allowed in a {role!r} message")
        _cache_control(block, at)
        if kind == "text":
            _anthropic_text(block, at)
        elif kind == "thinking":
            # [an-think] thinking blocks must be passed back unmodified, signature included; the published
            # ThinkingBlockParam has `signature: Required[str]`.
            _need(isinstance(block.get("thinking"), str), f"{at}.thinking.thinking", "Field required")
            _need(isinstance(block.get("signature"), str) and block["signature"] != "", f"{at}.thinking.signature",
                  "Field required")
        elif kind == "redacted_thinking":
            _need(isinstance(block.get("data"), str) and block["data"] != "", f"{at}.redacted_thinking.data",
                  "Field required")
        elif kind == "tool_use":
            uid = block.get("id")
            _need(isinstance(uid, str) and TOOL_USE_ID.fullmatch(uid) is not None, f"{at}.id",
                  "String should match pattern '^[a-zA-Z0-9_-]+$'")
            _need(isinstance(block.get("name"), str) and block["name"] != "", f"{at}.name", "Field required")
            _need(isinstance(block.get("input"), dict), f"{at}.input", "Input should be a valid dictionary")
        elif kind == "tool_result":
            _need(isinstance(block.get("tool_use_id"), str), f"{at}.tool_use_id", "Field required")
            if "is_error" in block:
                _need(isinstance(block["is_error"], bool), f"{at}.is_error", "Input should be a valid boolean")
            inner = block.get("content")
            if isinstance(inner, list):
                for n, sub in enumerate(inner):
                    _need(isinstance(sub, dict) and sub.get("type") in ("text", "image", "document",
                                                                         "search_result"),
                          f"{at}.content.{n}.type", "Input should be 'text', 'image', 'document' or 'search_result'")
                    if sub["type"] == "text":
                        _anthropic_text(sub, f"{at}.content.{n}")
            else:
                _need(inner is None or isinstance(inner, str), f"{at}.content",
                      "Input should be a valid string or list")
    return content


# -- the SDKs' published request types ------------------------------------------------------------


_PUBLISHED = {
    ("openai", True): ("openai.types.chat.completion_create_params", "CompletionCreateParamsStreaming"),
    ("openai", False): ("openai.types.chat.completion_create_params", "CompletionCreateParamsNonStreaming"),
    ("anthropic", True): ("anthropic.types.message_create_params", "MessageCreateParamsStreaming"),
    ("anthropic", False): ("anthropic.types.message_create_params", "MessageCreateParamsNonStreaming"),
}
_STRUCTURAL = {"str", "int", "float", "bool", "list", "dict", "none", "any"}


def published_types_status() -> dict[str, str]:
    """For each published request type: "ok", or why it could not be compiled (the hand rules then work alone)."""
    out: dict[str, str] = {}
    for (api, streaming), (module, name) in _PUBLISHED.items():
        for forbid in (True, False):
            _, problem = _published_validator(api, streaming, forbid)
            out[f"{module}.{name}{'' if forbid else ' (extra keys allowed)'}"] = problem or "ok"
    return out


@functools.cache
def _published_validator(api: str, streaming: bool, forbid_extra: bool) -> tuple[Any, str | None]:
    module, name = _PUBLISHED[(api, streaming)]
    try:
        import importlib

        import pydantic
        import pydantic_core

        typed_dict = getattr(importlib.import_module(module), name)
        schema = pydantic.TypeAdapter(typed_dict).core_schema
        return pydantic_core.SchemaValidator(_tighten(schema, forbid_extra)), None  # type: ignore[arg-type]
    except Exception as err:  # pragma: no cover - depends on the installed SDK
        return None, f"{type(err).__name__}: {err}"


def _tighten(schema: Any, forbid_extra: bool) -> Any:
    """The core schema as strict as the server: Iterable fields validated as lists (pydantic makes them lazy
    generators, checked only when consumed) and, with ``forbid_extra``, no unknown keys in any TypedDict or in
    the SDK response models some unions also accept."""
    if isinstance(schema, list):
        return [_tighten(s, forbid_extra) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _tighten(v, forbid_extra) for k, v in schema.items()}
    kind = out.get("type")
    if kind == "generator":
        out["type"] = "list"
    elif forbid_extra and kind in ("typed-dict", "model-fields"):
        out["extra_behavior"] = "forbid"
    elif forbid_extra and kind == "model" and isinstance(out.get("config"), dict):
        out["config"] = {**out["config"], "extra_fields_behavior": "forbid"}
    return out


def _published(body: dict[str, Any], api: str, *, forbid_extra: bool) -> None:
    validator, _ = _published_validator(api, body.get("stream") is True, forbid_extra)
    if validator is None:
        return
    import pydantic_core

    try:
        # strict: no lax coercions ("100" for an integer, "yes" for a boolean); JSON has real types.
        validator.validate_python(body, strict=True)
    except pydantic_core.ValidationError as err:
        raise _schema_problem(err.errors(), api) from None


def _schema_problem(errors: list[Any], api: str) -> Invalid:
    """The one error a server would report, out of pydantic's errors for every branch of every union."""
    # A union branch whose discriminator (`role`, `type`) does not match is not the branch the body meant.
    wrong = [tuple(e["loc"][:-1]) for e in errors if e["type"] == "literal_error" and e["loc"]
             and e["loc"][-1] in ("role", "type") and _is_structural(e["loc"][-2] if len(e["loc"]) > 1 else 0)]
    meant = [e for e in errors if not any(tuple(e["loc"][:len(w)]) == w for w in wrong)] or errors
    best = max(meant, key=lambda e: len(e["loc"]))  # the deepest: closest to the offending value
    loc = [p for p in best["loc"] if not _is_structural(p)]
    if api == "anthropic":
        return Invalid(".".join(map(str, loc)) or None, best["msg"])
    path = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in loc)
    if best["type"] == "extra_forbidden":
        parent = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in loc[:-1])
        if not parent:
            return Invalid(None, f"Unrecognized request argument supplied: {loc[-1]}")
        return Invalid(parent, f"Additional properties are not allowed ('{loc[-1]}' was unexpected)")
    if best["type"] == "missing":
        return Invalid(path, f"Missing required parameter: '{path}'.")
    return Invalid(path or None, f"Invalid value for '{path}': {best['msg']}.")


def _is_structural(part: Any) -> bool:
    """A union branch tag in a pydantic error location (a class name, `str`, `list[...]`), not a field name."""
    return isinstance(part, str) and (part[:1].isupper() or "[" in part or part in _STRUCTURAL)
