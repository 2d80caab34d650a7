"""ContextManager: token pressure and the graduated response (seed 004).

After every turn the loop tells it what the provider reported and what was
appended; ``evaluate`` then says Continue, Mask, Compact, WindDown or Restart:

- the conversation holds more than COMPACT_AT tokens that masking cannot free
  (the agent's own messages, placeholders, notices) beyond the turns a
  compaction keeps: Compact, in place: the deterministic summary plus the last
  whole turns (never fewer than hold the newest results), no restart;
- the stale tool results (all but the newest KEEP_RECENT_RESULTS) outweigh
  MASK_BATCH times the rest of the prompt: Mask all of them, in one batch;
- at or above the soft threshold: Mask every stale result, if that frees at
  least 5% of the budget and fits (no loop of tiny maskings that free nothing);
- at or above the hard threshold, or when the next prompt would not fit, and
  the newest results alone are too big: Mask all but the newest one or two;
- at or above the hard threshold with nothing worth masking: WindDown, once:
  the agent gets one more turn to save its state;
- the turn after a wind-down, or any time the next prompt would not fit: Restart.

The first two rules are about cost, not room: every masking or compaction is a
prompt-cache break from its first change on (with explicit breakpoints and with
automatic prefix caching alike), so they come in batches that pay for their
rewrite, and the prefix stays byte-identical in between (benchmarks/tokens.py
prices this against peers' policies on recorded trajectories).

The thresholds are shares of the prompt budget: the window less the reply's
reserve (max_output_tokens) and a 2% margin, so prompt + reply always fit the
window. What the agent is told (the wind-down message, the mask notice) is the
share of the whole window, as seed 004 words it: "Context window 80% full".

It also counts the session's turns (seed 004's ``increment_turn``): recorded
with every commit, so the restart marker can name the previous session's turn
count even when that session was resumed after a kill.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, Field

from console.engine.context.masking import MaskPlan, plan_of, unprotected, worth_masking
from console.engine.context.tokens import estimate_message
from console.engine.messages import Message
from console.engine.run_setting_specs import DEFAULT_COMPACT_AT

DEFAULT_SOFT = 0.70
DEFAULT_HARD = 0.85
# Masking is a prompt-cache break from the first masked result on: every provider (explicit breakpoints or
# automatic prefix caching) then reads the rest of the prompt anew. So results are masked in batches, all the
# stale ones at once, when they have grown to MASK_BATCH times the rest of the prompt (what a masking
# rewrites, about): the rewrite is paid once per batch and the prefix stays stable in between, instead of
# carrying stale output in every prompt until the window is nearly full (benchmarks/tokens.py measures it).
MASK_BATCH = 0.5
MASK_BATCH_MIN = 1_000  # tokens: below this a masking is not worth its rewrite, whatever the prompt
# The agent's newest results are never masked (the benchmark checks that the last 3 are always whole).
KEEP_RECENT_RESULTS = 3
# What masking cannot free (the agent's own messages, placeholders, notices) is read again in every prompt.
# Once the conversation holds this much of it beyond the turns a compaction carries, the session compacts
# in place: the conversation becomes the deterministic summary plus the last carryover_turns whole turns
# (at least KEEP_RECENT_RESULTS)
# (seed 004's carryover, without a restart: no wind-down turn, no restart counted). The dearer share of a
# long job's prompts is this part, once observations are masked: peers carry it to the end.
COMPACT_AT = DEFAULT_COMPACT_AT  # the run's compact_at unless set ([context] compact_at; 0: never in place)
COMPACT_SHARE = 0.4  # of the prompt budget, in a window too small for COMPACT_AT
TREND_LEN = 30


class ContextAction(StrEnum):
    CONTINUE = "continue"
    MASK = "mask"
    COMPACT = "compact"
    WIND_DOWN = "wind_down"
    RESTART = "restart"


class PressureState(BaseModel):
    """What a ContextManager knows between turns, recorded with every commit so a resume decides alike."""

    # Bounded: a damaged journal must not feed a size past any float into the arithmetic.
    used: int = Field(default=0, ge=0, le=10**12)
    wind_down_sent: bool = False
    turns_since_wind_down: int = Field(default=0, ge=0, le=10**9)
    masked_total: int = Field(default=0, ge=0, le=10**12)
    trend: list[Annotated[int, Field(ge=0, le=10**12)]] = Field(default_factory=list, max_length=TREND_LEN)
    # The session's turns so far (replies recorded). Absent from checkpoints of older versions: 0, and the
    # count goes on from the resume.
    turns: int = Field(default=0, ge=0, le=10**9)
    # The prompt budget and hard threshold the state was judged under (0: a checkpoint of an older version): a
    # resume under other settings (a larger --context-window) judges a restart that was due again.
    budget: int = Field(default=0, ge=0, le=10**12)
    hard: float = Field(default=0.0, ge=0, le=1)


@dataclass
class Evaluation:
    action: ContextAction
    used: int
    pct: float  # of the prompt budget (what the thresholds are compared with)
    plan: MaskPlan | None = None
    window_pct: float = 0.0  # of the whole window (what the agent is told)


@dataclass(frozen=True)
class _Index:
    """What the ContextManager found of a conversation's messages (see ContextManager._index)."""

    messages: list[Message] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)  # each message's estimate
    total: int = 0  # their sum
    results: list[int] = field(default_factory=list)  # where the tool results are
    candidates: list[int] = field(default_factory=list)  # the results worth masking (masking.worth_masking)
    starts: list[int] = field(default_factory=list)  # where the turns start (the assistant's messages)

    def grown(self, new: list[Message], size: Callable[[Message], int]) -> _Index:
        """This index with ``new`` messages appended (a new index: one that was handed out stays as it was)."""
        at = len(self.messages)
        sizes = [size(m) for m in new]
        results, candidates, starts = list(self.results), list(self.candidates), list(self.starts)
        for i, (m, n) in enumerate(zip(new, sizes, strict=True), at):
            if m.role == "tool":
                results.append(i)
                if worth_masking(m, n):
                    candidates.append(i)
            elif m.role == "assistant":
                starts.append(i)
        return _Index([*self.messages, *new], self.sizes + sizes, self.total + sum(sizes), results, candidates,
                      starts)


@dataclass
class ContextManager:
    window: int
    soft: float = DEFAULT_SOFT
    hard: float = DEFAULT_HARD
    keep_recent: int = KEEP_RECENT_RESULTS
    # Tokens the reply may take (the request's max_output_tokens): prompt + reply must fit the window.
    reserve: int = 0
    # The size of the next prompt, as far as we know it: the last reported prompt size
    # plus estimates of everything appended since.
    used: int = 0
    wind_down_sent: bool = False
    turns_since_wind_down: int = 0
    masked_total: int = 0
    trend: list[int] = field(default_factory=list)
    last_action: str = ""
    turns: int = 0
    # How many whole turns a compaction keeps (the run's carryover_turns).
    carry_turns: int = 3
    # The run's compact_at (0: never in place).
    compact_tokens: int = COMPACT_AT
    # Each message's estimate, by id, with the message itself (see size()).
    _sizes: dict[int, tuple[Message, int]] = field(default_factory=dict, repr=False)
    _seen: _Index = field(default_factory=lambda: _Index(), repr=False)

    @property
    def margin(self) -> int:
        # For what the estimate cannot see yet: a harness notice, the todo display growing by a line.
        return max(100, int(self.window * 0.02))

    @property
    def budget(self) -> int:
        """The most a prompt may take: the window less the reply's reserve and a small margin.

        Thresholds are shares of this budget, so a prompt that stays under it always leaves
        room for the reply, whatever the window size.
        """
        return max(1, self.window - self.reserve - self.margin)

    @property
    def pct(self) -> float:
        return self.used / self.budget

    @property
    def window_pct(self) -> float:
        """The share of the whole window the next prompt takes (seed 004's ``usage_percentage``)."""
        return self.used / max(1, self.window)

    @property
    def fits(self) -> bool:
        return self.used <= self.budget

    @property
    def min_free(self) -> int:
        return max(200, int(self.budget * 0.05))

    def record_usage(self, input_tokens: int, output_tokens: int) -> None:
        """A turn finished: the prompt was ``input_tokens``; the reply adds ``output_tokens``."""
        self.used = input_tokens + output_tokens
        self.trend = [*self.trend[-(TREND_LEN - 1):], self.used]
        self.turns += 1
        if self.wind_down_sent:
            self.turns_since_wind_down += 1

    def appended(self, messages: list[Message]) -> None:
        self.used += sum(map(self.size, messages))

    def size(self, m: Message) -> int:
        """estimate_message(m), remembered per message: evaluate() reads the whole conversation every turn, and a
        message is never changed in place (masking, elision and compaction put new ones in its place)."""
        known = self._sizes.get(id(m))
        if known is not None and known[0] is m:
            return known[1]
        n = estimate_message(m)
        self._sizes[id(m)] = (m, n)  # the message is held with its size: its id cannot be reused meanwhile
        return n

    def sizes(self, conversation: list[Message]) -> list[int]:
        """Each message's estimate. The conversation mostly grows at its end: when it still starts with the
        messages last seen, only the new ones are looked at."""
        return self._index(conversation).sizes

    def _index(self, conversation: list[Message]) -> _Index:
        """What evaluate() reads of the conversation every turn (sizes, where the results and the turns are, the
        results worth masking), kept for the messages it still starts with: only new ones are looked at. A
        message is never changed in place (masking, elision and compaction put new ones in its place), so what
        was found of one stays true while it is there."""
        index = self._seen
        if len(index.messages) <= len(conversation) and all(map(operator.is_, index.messages, conversation)):
            index = index.grown(conversation[len(index.messages):], self.size)
        else:
            index = _Index().grown(conversation, self.size)
        if len(self._sizes) > 2 * len(conversation) + 64:
            # Messages masked, elided or compacted away: keep only what the conversation holds.
            self._sizes = {id(m): (m, n) for m, n in zip(conversation, index.sizes, strict=True)}
        self._seen = index
        return index

    def freed(self, tokens: int) -> None:
        self.used = max(0, self.used - tokens)

    def reset(self, used: int) -> None:
        """After a compaction or at session start: the prompt is now ``used`` tokens (estimated)."""
        self.used = used
        self.wind_down_sent = False
        self.turns_since_wind_down = 0

    @property
    def compact_at(self) -> int:
        if self.compact_tokens <= 0:
            return sys.maxsize  # compaction only at phase boundaries and restarts
        return min(self.compact_tokens, int(self.budget * COMPACT_SHARE))

    @property
    def compact_turns(self) -> int:
        """The whole turns a compaction keeps: the run's carryover, and never fewer than hold the newest
        ``keep_recent`` results (which no masking touches either)."""
        return max(self.carry_turns, self.keep_recent, 1)

    def carried_tokens(self, conversation: list[Message]) -> int:
        """What a compaction keeps of the conversation: its last ``compact_turns`` turns, about."""
        return self._carried(self._index(conversation))

    def _carried(self, index: _Index) -> int:
        starts, n = index.starts, self.compact_turns
        first = starts[-n] if len(starts) >= n else (starts[0] if starts else 0)
        return sum(index.sizes[first:])

    def evaluate(self, conversation: list[Message]) -> Evaluation:
        used, pct, wpct = self.used, self.pct, self.window_pct
        if self.wind_down_sent and self.turns_since_wind_down >= 1:
            return Evaluation(ContextAction.RESTART, used, pct, window_pct=wpct)
        pressed = pct >= self.soft or not self.fits
        index = self._index(conversation)
        sizes = index.sizes
        # Every stale result goes in one batch: the cheapest per token freed, and the longest until the next.
        plan = plan_of(unprotected(index.candidates, index.results, self.keep_recent), used, sizes)
        rest = used - plan.tokens_freed
        # The conversation's part that masking cannot free, beyond what a compaction would carry.
        kept = index.total - plan.tokens_freed
        if kept - self._carried(index) >= self.compact_at:  # the index just read: not looked up again
            return Evaluation(ContextAction.COMPACT, used, pct, window_pct=wpct)
        batch = plan.tokens_freed >= max(MASK_BATCH_MIN, int(MASK_BATCH * rest))
        if pressed:
            # Under pressure the batch must free enough to be worth it (no loop of tiny maskings) and fit.
            batch = plan.tokens_freed >= self.min_free and rest <= self.budget
        if plan.indices and batch:
            return Evaluation(ContextAction.MASK, used, pct, plan, window_pct=wpct)
        if not pressed:
            return Evaluation(ContextAction.CONTINUE, used, pct, window_pct=wpct)
        if pct >= self.hard or not self.fits:
            # A window too small for the newest results themselves: mask one more of them rather than wind
            # down or restart, which lose more (the newest result is always kept).
            for keep in range(self.keep_recent - 1, 0, -1):
                plan = plan_of(unprotected(index.candidates, index.results, keep), used, sizes)
                if plan.indices and plan.tokens_freed >= self.min_free and used - plan.tokens_freed <= self.budget:
                    return Evaluation(ContextAction.MASK, used, pct, plan, window_pct=wpct)
        if not self.fits:
            return Evaluation(ContextAction.RESTART, used, pct, window_pct=wpct)
        if pct >= self.hard and not self.wind_down_sent:
            return Evaluation(ContextAction.WIND_DOWN, used, pct, window_pct=wpct)
        return Evaluation(ContextAction.CONTINUE, used, pct, window_pct=wpct)

    def snapshot(self) -> PressureState:
        return PressureState(used=self.used, wind_down_sent=self.wind_down_sent,
                             turns_since_wind_down=self.turns_since_wind_down, masked_total=self.masked_total,
                             trend=list(self.trend), turns=self.turns, budget=self.budget, hard=self.hard)

    def restore(self, s: PressureState) -> None:
        self.used, self.wind_down_sent = s.used, s.wind_down_sent
        self.turns_since_wind_down, self.masked_total = s.turns_since_wind_down, s.masked_total
        self.trend = list(s.trend)
        self.turns = s.turns

    @property
    def restart_due(self) -> bool:
        """The wind-down's turn is over: the next evaluation restarts, whatever the figures (seed 004)."""
        return self.wind_down_sent and self.turns_since_wind_down >= 1

    def restart_stale(self, recorded: PressureState) -> bool:
        """Restored from ``recorded``, which called for a restart (the wind-down's turn was over): whether that
        restart no longer holds under this manager's settings, which differ from those it was judged under (a
        resume with a larger window or a higher hard threshold): the next prompt fits, under the hard threshold.
        The same settings (or a checkpoint that did not say them) keep it: a resume decides as the run would
        have."""
        if not self.restart_due or not recorded.budget:
            return False
        if (recorded.budget, recorded.hard) == (self.budget, self.hard):
            return False
        return self.fits and self.pct < self.hard

    def go_on(self) -> None:
        """The restart that was due is dropped: the session goes on (a wind-down is sent again at the hard
        threshold)."""
        self.wind_down_sent = False
        self.turns_since_wind_down = 0

    def mark_wind_down(self) -> None:
        self.wind_down_sent = True
        self.turns_since_wind_down = 0


# Seed 004's wind-down message, word for word, with the share of the whole window; then what the harness
# keeps, so the agent knows what it need not save.
WIND_DOWN_MESSAGE = (
    "[Context window {pct:.0%} full. Please wrap up your current task and write any important state to "
    "workspace files. The session will restart shortly.]"
)
WIND_DOWN_HOW = (
    "(add_note, add_accomplishment or your own files hold what you save. The restart comes after your next "
    "turn; your todo list, main_plan.md and your files are kept.)"
)


def wind_down_message(window_pct: float) -> str:
    """What the agent reads at the hard threshold: seed 004's words, with the window's share."""
    return WIND_DOWN_MESSAGE.format(pct=window_pct) + "\n" + WIND_DOWN_HOW


def restart_marker(session: int, previous_turns: int | None, carried_turns: int = 0, *,
                   interrupted: bool = False) -> str:
    """The message that opens a restarted session (seed 004): its number and the previous session's turns.

    ``previous_turns`` None: not known (a session rebuilt after its journal was lost). ``interrupted``: the
    previous session did not end for a full context; its conversation could not be restored."""
    why = ("The previous session was interrupted and its conversation could not be restored." if interrupted
           else "Previous session context was full.")
    ran = "" if previous_turns is None else (
        f" Session #{session - 1} ran {previous_turns} turn{'' if previous_turns == 1 else 's'}."
        if session > 1 else "")
    carried = (f" The last {carried_turns} turn{'' if carried_turns == 1 else 's'} "
               f"{'is' if carried_turns == 1 else 'are'} carried over." if carried_turns else "")
    return (f"[Session restarted. Session #{session}. {why}{ran}{carried} Check your workspace files for progress "
            "state.]")
