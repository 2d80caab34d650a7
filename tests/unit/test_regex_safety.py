"""No pattern in console/ may backtrack catastrophically (DESIGN: "No pattern on untrusted text can
backtrack catastrophically").

Every module under ``console`` is imported and every module-level compiled pattern (``re.Pattern`` and
``regex.Pattern``, also inside module-level tuples, lists and dicts and on classes) is run with search(),
match(), fullmatch() and finditer() against a family of adversarial strings of ~5,000 characters: runs of
every character the pattern mentions and of the usual suspects (spaces, tabs, '#', '-', '*', '[', ']', '.',
'/', ':', letters, digits, newlines), alternations of two of them, and "witnesses" that take the pattern
part way (its literal fragments, one representative per character class) repeated, or followed by a long
run and a character that breaks the match. A call over SUSPECT_SECONDS (0.02 s) is suspect: a linear pattern
runs any of these inputs in well under a millisecond, a quadratic one in tens of milliseconds to seconds, a
catastrophic one for years. A suspect is timed again on its input with the long run halved (best of three
each): a pattern fails if half the input takes under a third of the time (linear would be a half), a ratio that
holds on a slow machine as on a fast one, so the verdict never rests on the machine's speed. Every time here is
the CPU time of the calling thread (time.thread_time), never the wall clock: other work on the cores does not make
a call look slower (wall time did: a call of a linear pattern took 0.023 s against 0.002 s on its half, best of
three, with the suite beside other work on 2 cores). A call still running after HANG_SECONDS of CPU is
interrupted (SIGVTALRM), so a bad pattern fails the test instead of hanging it. The known-bad patterns below are
found by the very same function.
"""

from __future__ import annotations

import importlib
import itertools
import pkgutil
import re
import signal
import time
from collections.abc import Iterable, Iterator
from re import _constants as sre_constants  # type: ignore[attr-defined]  # Python 3.11+
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

import pytest
import regex

import console
from tests.sweeps import Sweep

SUSPECT_SECONDS = 0.02
HANG_SECONDS = 2.0
N = 5000
# Inputs of the family each pattern runs in the README's test command (a fixed-seed draw, tests/sweeps.py); every
# one with --full-sweeps. The known-bad patterns below are each caught within this many.
SAMPLE_INPUTS = 300

METHODS = ("search", "match", "fullmatch", "finditer")
# Exceptions, as "module:NAME": (the methods still checked, why the others cannot be reached). Prefer fixing.
ALLOWLIST: dict[str, tuple[tuple[str, ...], str]] = {
    # Only ever fullmatch()ed against directory entry names (at most 255 bytes): anchored, it is linear; only
    # search() on a long text, which the code never does, is quadratic ("\..*\." from every dot).
    "console.engine.sandbox.kernel:_BESIDE_TMP": (("match", "fullmatch"), "anchored use on file names only"),
    # Likewise fullmatch()ed on the names in the tool docs folder only: search() would be quadratic for _TEMP
    # ("\..+\." from every dot) and 64 steps a character for _DOC_NAME.
    "console.engine.tools.docs_folder:_TEMP": (("match", "fullmatch"), "anchored use on file names only"),
    "console.engine.tools.docs_folder:_DOC_NAME": (("match", "fullmatch"), "anchored use on file names only"),
}

BASE_CHARS = [" ", "\t", "#", "-", "*", "[", "]", ".", "/", ":", "a", "Z", "0", "\n", "_", "`", "(", ")", "<"]
BREAKERS = ["", "!", "\x00", "x", "\n"]


def _modules() -> list[Any]:
    mods = [console]
    for info in pkgutil.walk_packages(console.__path__, prefix="console."):
        mods.append(importlib.import_module(info.name))
    return mods


def _patterns_in(value: Any, depth: int = 0) -> Iterator[Any]:
    if isinstance(value, re.Pattern | regex.Pattern):
        yield value
    elif depth < 2 and isinstance(value, tuple | list | frozenset | set):
        for v in value:
            yield from _patterns_in(v, depth + 1)
    elif depth < 2 and isinstance(value, dict):
        for v in value.values():
            yield from _patterns_in(v, depth + 1)


def collect_patterns() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for mod in _modules():
        for name, value in list(vars(mod).items()):
            owner = getattr(value, "__module__", mod.__name__)
            if isinstance(value, type) and owner == mod.__name__:
                for attr, inner in vars(value).items():
                    for i, p in enumerate(_patterns_in(inner)):
                        found.setdefault(f"{mod.__name__}:{name}.{attr}#{i}", p)
                continue
            for i, p in enumerate(_patterns_in(value)):
                key = f"{mod.__name__}:{name}" + (f"#{i}" if not isinstance(value, re.Pattern | regex.Pattern)
                                                  else "")
                # A pattern imported from another module is tested once, under the module that defines it.
                if not any(q is p for q in found.values()):
                    found[key] = p
    return found


_CATEGORY_CHARS = {
    "CATEGORY_DIGIT": "7", "CATEGORY_NOT_DIGIT": "q", "CATEGORY_SPACE": " ", "CATEGORY_NOT_SPACE": "q",
    "CATEGORY_WORD": "w", "CATEGORY_NOT_WORD": "!", "CATEGORY_LINEBREAK": "\n", "CATEGORY_NOT_LINEBREAK": "q",
}
_REPEATS = (sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT,
            getattr(sre_constants, "POSSESSIVE_REPEAT", sre_constants.MAX_REPEAT))
_CAP = 6  # witnesses kept per sub-pattern: enough to reach every branch of the patterns we have


def _category(av: Any) -> str:
    return _CATEGORY_CHARS.get(str(av).rsplit(".", 1)[-1].upper(), "w")


def _set_chars(items: list) -> list[str]:
    """Characters a character set mentions (for a negated set: a few it does not)."""
    out: list[str] = []
    for op, av in items:
        if op is sre_constants.LITERAL:
            out.append(chr(av))
        elif op is sre_constants.RANGE:
            out += [chr(av[0]), chr(av[1])]
        elif op is sre_constants.CATEGORY:
            out.append(_category(av))
    if items and items[0][0] is sre_constants.NEGATE:
        return [c for c in "qa!7 -" if c not in out][:2]
    return out


def _element(op: Any, av: Any) -> list[str]:
    """Short strings one element of a parsed pattern matches (its witnesses)."""
    if op is sre_constants.LITERAL:
        return [chr(av)]
    if op is sre_constants.NOT_LITERAL:
        return ["q" if chr(av) != "q" else "z"]
    if op is sre_constants.ANY:
        return ["a"]
    if op is sre_constants.IN:
        return _set_chars(av)[:1] or ["a"]
    if op is sre_constants.SUBPATTERN:
        return _witnesses(av[-1])
    if op in _REPEATS:
        return [w * min(max(1, av[0]), 3) for w in _witnesses(av[2])]
    if op is sre_constants.BRANCH:
        return list(dict.fromkeys(w for b in av[1] for w in _witnesses(b)))[:_CAP]
    return [""]  # anchors, lookarounds, group references


def _witnesses(seq: Any) -> list[str]:
    outs = [""]
    for op, av in seq:
        outs = list(dict.fromkeys(o + w for o in outs for w in _element(op, av)))[:_CAP]
    return outs


def _inner(op: Any, av: Any) -> list[Any]:
    if op is sre_constants.SUBPATTERN:
        return [av[-1]]
    if op in _REPEATS:
        return [av[2]]
    if op is sre_constants.BRANCH:
        return list(av[1])
    return []


def _prefixes(seq: Any, limit: int = 40) -> list[str]:
    """Strings that take the pattern part way through: the states where a long run can hurt."""
    out: list[str] = []
    done = [""]
    items = list(seq)
    for i, (op, av) in enumerate(items):
        for body in _inner(op, av):
            out += [d + p for d in done for p in _prefixes(body, limit)]
        done = list(dict.fromkeys(d + w for d in done for w in _element(op, av)))[:_CAP]
        if not (op is sre_constants.LITERAL and i + 1 < len(items) and items[i + 1][0] is sre_constants.LITERAL):
            out += done  # inside a run of literals only the whole run counts
    return [p for p in dict.fromkeys(out) if p][:limit]


def _chars(seq: Any, into: set[str]) -> None:
    for op, av in seq:
        if op in (sre_constants.LITERAL, sre_constants.NOT_LITERAL):
            into.add(chr(av))
        elif op is sre_constants.IN:
            into.update(_set_chars([x for x in av if x[0] is not sre_constants.NEGATE]))
        elif op is sre_constants.ASSERT or op is sre_constants.ASSERT_NOT:
            _chars(av[1], into)
        for body in _inner(op, av):
            _chars(body, into)


def analyse(pattern: Any) -> tuple[list[str], list[str]]:
    """The characters a pattern mentions and its prefix witnesses (best effort for regex-module syntax)."""
    chars: set[str] = set()
    try:
        parsed = sre_parse.parse(pattern.pattern, pattern.flags & (re.IGNORECASE | re.MULTILINE | re.DOTALL))
    except Exception:  # regex-module-only syntax: the literal characters of the source will do
        chars.update(ch for ch in pattern.pattern if ch not in "\\()[]{}?*+|^$")
        return sorted(chars), []
    _chars(parsed, chars)
    return sorted(chars), _prefixes(parsed)


class Probe(str):
    """An adversarial input that knows its half: the same shape with every long run halved. Cutting the text itself
    in two (the default, for the shapes of one long run) would drop a two-run input's second run whole and keep its
    first run whole: a pattern quadratic in the first run then took as long on the "half" and was judged linear."""

    half: str

    def __new__(cls, text: str, half: str) -> Probe:
        probe = super().__new__(cls, text)
        probe.half = half
        return probe


def adversarial_inputs(pattern: Any) -> Iterator[str]:
    chars, prefixes = analyse(pattern)
    pool = list(dict.fromkeys(BASE_CHARS + chars))
    for c in pool:
        for b in BREAKERS:
            yield c * N + b
            yield b + c * N + b
    for c, d in itertools.combinations(pool, 2):
        yield (c + d) * (N // 2) + "!"
        yield Probe(c * (N // 2) + d * (N // 2) + "!", c * (N // 4) + d * (N // 4) + "!")
    runs = list(dict.fromkeys([" ", "\t", "a", "0", "#", "-", "\n", *chars]))
    for p in prefixes:
        yield p * max(1, N // len(p))
        yield p * max(1, N // len(p)) + "!"
        for c in runs:
            yield p + c * N + "!"
            yield p + c * N + "\n!"
            yield (p + c) * max(1, N // (len(p) + 1)) + "!"


PATTERNS = collect_patterns()


def test_the_collector_finds_the_known_patterns() -> None:
    names = set(PATTERNS)
    assert len(names) >= 10, names
    assert any(n.startswith("console.providers.scripted_agent:") for n in names)
    # The demo model's patterns moved with its split (console/providers/scripted_*.py); markdown_lite has none
    # left (markdown-it-py parses the agent's Markdown).
    assert any(n.startswith("console.providers.scripted_requirements:") for n in names)
    assert not any(n.startswith("console.tui.widgets.markdown_lite:") for n in names)


class _Hung(Exception):
    pass


def _on_alarm(signum: int, frame: object) -> None:
    raise _Hung


def timed(pattern: Any, method: str, text: str, hang: float = HANG_SECONDS) -> float:
    """CPU seconds one call takes (this thread's); a call still running after ``hang`` CPU seconds is interrupted
    (and counts as that)."""
    previous = signal.signal(signal.SIGVTALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_VIRTUAL, hang)
    start = time.thread_time()
    try:
        # A bytes pattern (one that reads log lines as bytes) gets the same text, encoded.
        subject: Any = text.encode("utf-8", "surrogatepass") if isinstance(pattern.pattern, bytes) else text
        result = getattr(pattern, method)(subject)
        if method == "finditer":
            for _ in itertools.islice(result, 10_000):
                pass
    except _Hung:
        return hang
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)
    return time.thread_time() - start


def superlinear(pattern: Any, methods: tuple[str, ...] = METHODS, hang: float = HANG_SECONDS,
                texts: Iterable[str] | None = None) -> tuple[str, str, float, float] | None:
    """The first call of the adversarial family (or of ``texts``, a part of it) on which the pattern is
    superlinear, as (method, input, seconds on the input, seconds on its half), or None: a call over
    SUSPECT_SECONDS is timed again on the input and on its half, and counts if it hangs, or if it is still over the
    line and the half takes under a third of the time."""
    for text in adversarial_inputs(pattern) if texts is None else texts:
        for method in methods:
            took = timed(pattern, method, text, hang)
            if took <= SUSPECT_SECONDS:
                continue
            if took >= hang:  # interrupted: no need to time it again
                return method, text, took, 0.0
            full_t, half_t = scaling(pattern, method, text, hang)
            # Still over the line at its best of three (a load spike does not last three calls) and superlinear.
            if full_t >= hang or (full_t > SUSPECT_SECONDS and full_t >= 3 * half_t):
                return method, text, full_t, half_t
    return None


@pytest.mark.parametrize(
    "source, flags",
    [
        (r"(a+)+$", 0),  # the textbook case
        (r"^(?P<hashes>#{1,4})\s*(?P<body>.*?)\s*#*\s*$", 0),  # main_plan.md headings before the fix (cubic)
        (r"^(?P<indent>\s*)(?P<bullet>[-*+]|\d+[.)])\s+\[(?P<mark>[ xX✓✔])\]\s*(?P<text>.*?)\s*$", 0),  # checkboxes
        (r"\s*(?:(?:←|<-+|⬅)\s*(?i:current|in progress)?|[\[(]\s*(?i:current|in progress)\s*[\])]"
         r"|CURRENT|IN PROGRESS)\s*$", 0),  # the phase name's current marker, found with search()
        (r"^\s*([-*_]\s*){3,}$", re.M),  # a thematic break whose \s spans lines: quadratic on blank lines
    ],
)
def test_the_inputs_catch_known_bad_patterns(source: str, flags: int, sweep: Sweep) -> None:
    """The family finds each known-bad pattern, with the check every pattern of console/ gets: some input on
    which it hangs, or twice the input takes at least three times as long (linear would be two). The scan stops
    at that input: each of these patterns is caught within its first few hundred inputs, where scanning the
    whole family (as a linear pattern is) took up to 45 s of CPU for the five."""
    # The inputs the linear test gives a pattern (the seeded sample, or all with --full-sweeps) catch each one.
    pattern = re.compile(source, flags)
    texts = sweep.subset(list(adversarial_inputs(pattern)), SAMPLE_INPUTS, source)
    found = superlinear(pattern, hang=1.0, texts=texts)  # the exponential one: a second is enough
    assert found is not None, "the adversarial family did not catch a known-bad pattern"


def test_a_runaway_call_is_interrupted_not_hung() -> None:
    # Uninterrupted, the call would run for years: its coming back at all, as interrupted, is the proof.
    assert timed(re.compile(r"(a|aa)+$"), "match", "a" * 200 + "!", hang=0.2) == 0.2


@pytest.mark.sweep
@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_pattern_is_linear_on_adversarial_input(name: str, sweep: Sweep) -> None:
    """The whole family with --full-sweeps (.ci/run); else SAMPLE_INPUTS of it drawn with the sweep's seed (the
    family is ~90,000 calls of 5,000 characters for the 67 patterns: about a tenth of the suite's CPU)."""
    methods = ALLOWLIST.get(name, (METHODS, ""))[0]
    pattern = PATTERNS[name]
    family = list(adversarial_inputs(pattern))
    texts = sweep.subset(family, SAMPLE_INPUTS, name)
    found = superlinear(pattern, methods, texts=texts)
    if found is None:
        return
    method, text, full_t, half_t = found
    pytest.fail(
        f"[{sweep.describe()}, {len(texts)} of {len(family)} inputs] "
        f"{name} = {pattern.pattern!r}: {method}() took {full_t:.3f} s on {text[:40]!r}... ({len(text)} chars) "
        f"against {half_t:.3f} s on half of it; rewrite it with string methods or without adjacent ambiguous "
        "quantifiers"
    )


def scaling(pattern: Any, method: str, text: str, hang: float = HANG_SECONDS) -> tuple[float, float]:
    """The best of three timings on ``text`` and on it with its long run halved (the end that breaks the match
    kept): a linear pattern takes about half the time on the half, a quadratic one a quarter."""
    half = text.half if isinstance(text, Probe) else text[: len(text) // 2] + text[-1:]
    return (min(timed(pattern, method, text, hang) for _ in range(3)),
            min(timed(pattern, method, half, hang) for _ in range(3)))


def test_a_two_run_input_is_timed_against_both_runs_halved() -> None:
    """The half a suspect is timed on has the input's shape: each run halved, the breaker kept (the text cut in two
    kept the first run whole and dropped the second: a pattern quadratic in the first run looked linear)."""
    probes = [t for t in adversarial_inputs(re.compile(r"#+-+")) if isinstance(t, Probe)]
    assert probes
    for probe in probes:
        runs = [(c, len(list(g))) for c, g in itertools.groupby(probe)]
        halves = [(c, len(list(g))) for c, g in itertools.groupby(probe.half)]
        assert [c for c, _ in halves] == [c for c, _ in runs]  # the same runs, in the same order
        assert [n for _, n in halves] == [n // 2 if n > 1 else n for _, n in runs]
