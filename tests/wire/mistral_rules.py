"""What an OpenAI-compatible server running a Mistral-family model refuses: the ``mistral_template`` dialect.

Mistral Small / Medium, Devstral, Magistral and Ministral reach agent-console two ways, both stricter than OpenAI:

- through the model's Jinja chat template (vLLM's ``examples/tool_chat_template_mistral*.jinja``, the GGUFs' own
  templates in llama.cpp and LM Studio), whose ``raise_exception(...)`` text comes back as the 400's message;
- through mistral_common's request validator (vLLM's ``--tokenizer-mode mistral``, Mistral's own API).

The rules below are the union of both, each with its source and the real error text where it is known:

- [jinja]  vLLM ``examples/tool_chat_template_mistral.jinja`` / ``_mistral3.jinja`` and Mistral-7B-Instruct-v0.3's
           ``chat_template``: the messages that are neither tool results nor tool-calling assistant turns must
           alternate user/assistant, user first: "After the optional system message, conversation roles must
           alternate user/assistant/user/assistant/..." (vllm-project/vllm#6862). Devstral's GGUF words it "...
           alternate user and assistant roles except for tool calls and results." Only a first system message.
- [common] mistral_common ``validator.py``: ``_validate_message_order`` ("Unexpected role 'user' after role
           'tool'", Mistral's API: type invalid_request_message_order, code 3230), ``_validate_assistant_message``
           (an assistant message without text or calls; Mistral's API: "Assistant message must have either content
           or tool_calls, but not none.", OpenHands#8685; vLLM 0.9 with the mistral tokenizer refuses ``content:
           ""`` the same way, vllm-project/vllm#21089), ``_validate_last_message`` (serving: the last message is a
           user or tool message).

Not modelled: the 9-character tool-call ids of the v3 tokenizer (the server issues the ids, and our adapter sends
back what it was given), and older validators' refusal of text next to tool calls (mistral_common#186; newer
validators allow both, and the templates render the calls only).
"""

from __future__ import annotations

from typing import Any

from .wire_rules import Invalid

ALTERNATE = "After the optional system message, conversation roles must alternate user/assistant/user/assistant/..."
EMPTY_REPLY = "Assistant message must have either content or tool_calls, but not none."


def check_mistral(body: dict[str, Any]) -> None:
    """Raise :class:`Invalid` for what a Mistral-family server refuses; ``body`` already passed the OpenAI rules."""
    messages: list[dict[str, Any]] = body["messages"]
    counted = 0  # user messages and assistant messages without tool calls, after the optional system message
    previous: str | None = None
    for i, msg in enumerate(messages):
        where = f"messages.[{i}]"
        role = msg["role"]
        if role == "system" and i > 0:
            # [jinja] a system message is only taken first; elsewhere it reaches the template's last branch.
            raise Invalid(f"{where}.role", "Only user and assistant roles are supported, with the exception of an "
                                           "initial optional system message!")
        if previous == "tool" and role not in ("tool", "assistant"):
            raise Invalid(f"{where}.role", f"Unexpected role '{role}' after role 'tool'")  # [common]
        calls = role == "assistant" and bool(msg.get("tool_calls"))
        if role == "assistant" and not calls:
            content = msg.get("content")
            text = content if isinstance(content, str) else "".join(
                p.get("text", "") for p in content or [] if isinstance(p, dict))
            if not text.strip():
                raise Invalid(f"{where}.content", EMPTY_REPLY)  # [common]
        if role in ("user", "assistant") and not calls:
            if (role == "user") != (counted % 2 == 0):
                raise Invalid(f"{where}.role", ALTERNATE)  # [jinja]
            counted += 1
        previous = role
    last = messages[-1]["role"]
    if last not in ("user", "tool"):
        # [common] serving: a request ends with what the model answers.
        raise Invalid("messages", "Expected last role User or Tool (or Assistant with prefix or "
                                  f"continue_final_message set to True) for serving but got {last}")
