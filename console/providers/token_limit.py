"""The name of a request's output limit, as the OpenAI protocol's servers spell it (settings key max_tokens_param).

OpenAI deprecated ``max_tokens``, and its reasoning models (o-series, gpt-5) refuse it, on OpenAI and on Azure
OpenAI alike; the servers that speak the protocol (vLLM, llama.cpp, LM Studio, Ollama) know ``max_tokens``, as do
Azure deployments behind an older API version. "auto" starts with the host's (max_completion_tokens for OpenAI and
Azure OpenAI, max_tokens elsewhere) and follows the server's refusal once.

Plain data, apart from both its readers: the registry (read at every start of the command line, for the settings'
type) and the OpenAI adapter (which loads the SDK) each import it, and neither imports the other for it.
"""

from __future__ import annotations

from typing import Literal, get_args

TokenLimit = Literal["max_tokens", "max_completion_tokens"]
MaxTokensParam = Literal["auto", TokenLimit]
MAX_TOKENS_PARAMS: tuple[str, ...] = get_args(MaxTokensParam)
# TokenLimit's names as values of its type (get_args gives them untyped), for token_limit to hand back.
TOKEN_LIMITS: tuple[TokenLimit, ...] = ("max_tokens", "max_completion_tokens")


def token_limit(name: object) -> TokenLimit | None:
    """``name`` as the output limit it names, or None when it names neither (a server's answer, read as JSON or
    matched in its message: a str or anything else, which mypy cannot narrow to the Literal)."""
    return next((limit for limit in TOKEN_LIMITS if name == limit), None)
