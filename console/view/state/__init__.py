"""What the console shows, folded from engine events. Pure Python: no Textual here.

The same fold serves a run in this process (events from the subscription) and an
attached console (events replayed from ``events.jsonl``, then followed). Every
pane reads from one :class:`ConsoleState`; :meth:`ConsoleState.apply` says which
aspects changed so the app refreshes only those panes. What the feedback pane and the
gauge say of an event is :func:`console.view.present.describe`'s line for it, the same words as
the headless log's and the conversation's. Every event is folded as :func:`console.view.present.safe_event` makes
it: what the panes, the dialogs and the fleet show of it cannot hold an escape sequence from the agent.

The fold is :mod:`.fold`, the records it keeps and the aspects :mod:`.parts`; everything is importable from here.
"""

from __future__ import annotations

from console.view.present import phase_label
from console.view.state.fold import ConsoleState
from console.view.state.parts import (
    EXPERIENCES,
    EXPERIENCES_KEEP,
    FEEDBACK,
    FEEDBACK_KEEP,
    GAUGE,
    GUARDS,
    OUTCOME_SHOWN,
    PLAN,
    RESTART,
    STATUS,
    TODOS,
    TREND_KEEP,
    ExperienceItem,
    FeedbackItem,
    GaugeState,
    GuardrailsState,
    McpServerTally,
    Need,
    ProviderTally,
    need_label,
)

__all__ = [
    "EXPERIENCES",
    "EXPERIENCES_KEEP",
    "FEEDBACK",
    "FEEDBACK_KEEP",
    "GAUGE",
    "GUARDS",
    "OUTCOME_SHOWN",
    "PLAN",
    "RESTART",
    "STATUS",
    "TODOS",
    "TREND_KEEP",
    "ConsoleState",
    "ExperienceItem",
    "FeedbackItem",
    "GaugeState",
    "GuardrailsState",
    "McpServerTally",
    "Need",
    "ProviderTally",
    "need_label",
    "phase_label",
]
