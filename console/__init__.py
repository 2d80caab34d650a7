"""agent-console: a guardrails engine and operator console for long-running LLM agents."""

__version__ = "0.1.0"
