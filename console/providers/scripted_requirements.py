"""Requirement extraction for the scripted demo model: statements with shall/must/should, quoted as written.

Text is cut into blocks (paragraphs and list items) and blocks into sentences. Fenced code blocks (``` or
~~~, indented or not, nested by a longer fence) never hide text: a statement inside one is found too, each
line of code read as a statement of its own (a block of prose, with no language or text/markdown, is
read as prose). A chunk of a long document may begin inside a block opened
before it, or open one it never closes: a bare fence after lines that look like code closes a block, and
a fence never closed, followed by prose, is read as a stray line, so the prose after it is still found.

A chunk's requirements are appended to the output under "## Lines A-B of SRC", once: before appending,
the model looks for that heading in the output, so a chunk done again (after a rewind) is not added twice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from console.providers.scripted_view import RANGE_RX, Call, Decision, View, body, complete, once, paths_in

REQ_RX = re.compile(r"\b(shall|must|should)\b", re.IGNORECASE)
# A plan step that extracts a chunk: "... lines 151-300 of docs/specification.md into requirements.md".
LINES_RX = re.compile(r"lines? (\d{1,12})\s*[-–]\s*(\d{1,12}) of ([^\s,;]+)", re.IGNORECASE)
LIST_MARK_RX = re.compile(r"^(?:[-*+]|\d+[.)])\s+")
SENTENCE_RX = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'])")
VAGUE_RX = re.compile(r"\b(quickly|fast|easy|simple|clear|good|reasonable|secure|highly available|"
                      r"user-friendly|appropriate|adequate|usable)\b", re.IGNORECASE)
CODE_SPAN_RX = re.compile(r"`[^`\n]*`")
KEYWORDS = ("shall", "must", "should")

# What a line of code looks like (to tell a block's inside from prose when its fence is out of view).
CODE_ENDS = ("{", "}", "[", "]", "(", ")", ",", ";", "\\", "=>", "->")
CODE_STARTS = ("{", "}", "[", "]", "<", '"', "'", "//", "/*", "*/", "$ ", ">>>", "#!", "@")
MAX_STRAY_FENCES = 32  # stray fences re-read per text; after that the rest is taken as it parses


# -- fences -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fence:
    char: str
    size: int
    info: str


def fence_of(line: str) -> Fence | None:
    """The fence a line is (``` or ~~~, three or more, any indentation), or None."""
    s = line.strip()
    if len(s) < 3 or s[0] not in "`~":
        return None
    size = len(s) - len(s.lstrip(s[0]))
    if size < 3:
        return None
    info = s[size:].strip()
    if s[0] == "`" and "`" in info:
        return None  # ```a``` is inline code, not a fence
    return Fence(s[0], size, info)


def closes(opener: Fence, f: Fence) -> bool:
    """A closing fence: the same character, at least as long, and nothing after it."""
    return f.char == opener.char and f.size >= opener.size and not f.info


def codelike(line: str) -> bool:
    s = line.strip()
    return bool(s) and (s.endswith(CODE_ENDS) or s.startswith(CODE_STARTS) or " = " in s)


def looks_like_code(lines: list[str]) -> bool:
    """Most of the non-blank lines look like code."""
    filled = [ln for ln in lines if ln.strip()]
    return bool(filled) and 2 * sum(1 for ln in filled if codelike(ln)) > len(filled)


FENCE, OUT, PROSE, CODE = "fence", "out", "prose", "code"
PROSE_INFOS = {"", "text", "txt", "plain", "plaintext", "markdown", "md", "none"}


def code_mask(lines: list[str]) -> list[str]:
    """Per line: FENCE for a fence line, OUT outside a block, else PROSE inside a block of prose (no
    language, or text/markdown) and CODE inside a block of code."""
    mask = [OUT] * len(lines)
    opener: Fence | None = None
    first = next(((i, f) for i, ln in enumerate(lines) if (f := fence_of(ln)) is not None), None)
    if first is not None and not first[1].info and looks_like_code(lines[:first[0]]):
        # The text starts inside a block opened before it (a chunk of a longer document).
        opener = Fence(first[1].char, first[1].size, "")
    start = 0
    for _ in range(MAX_STRAY_FENCES + 1):
        open_at: int | None = None
        for i in range(start, len(lines)):
            f = fence_of(lines[i])
            if opener is None and f is not None:
                opener, open_at, mask[i] = f, i, FENCE
            elif opener is not None and f is not None and closes(opener, f):
                opener, open_at, mask[i] = None, None, FENCE
            elif opener is None:
                mask[i] = OUT
            else:
                mask[i] = PROSE if opener.info.split(" ", 1)[0].lower() in PROSE_INFOS else CODE
        if opener is None or open_at is None or looks_like_code(lines[open_at + 1:]):
            break
        # A fence opened and never closed, followed by prose: read on after it as if it were not there.
        start, opener = open_at + 1, None
    return mask


# -- blocks and sentences ---------------------------------------------------------------------
def blocks(text: str) -> list[str]:
    """Paragraphs and list items; headings, tables and blank lines end one. Inside a fenced block of code
    every line is a block of its own; inside one of prose (no language, or text/markdown) so is every line
    that looks like code or is a '#' comment, and the other lines join as prose."""
    lines = text.splitlines()
    out: list[str] = []
    cur: list[str] = []

    def flush() -> None:
        if cur:
            out.append(" ".join(cur))
            cur.clear()

    for line, kind in zip(lines, code_mask(lines), strict=True):
        s = line.strip()
        if kind == FENCE or not s or fence_of(s) is not None:
            flush()
            continue
        if kind == CODE or (kind == PROSE and (codelike(s) or s.startswith("#"))):
            flush()
            out.append(s)
            continue
        if kind == OUT and s.startswith(("#", "|")):
            flush()
            continue
        if LIST_MARK_RX.match(s):
            flush()
            s = LIST_MARK_RX.sub("", s)
        cur.append(s)
    flush()
    return out


def extract_requirements(text: str) -> list[str]:
    """Sentences with shall/must/should, one per statement, in document order ("Note:" blocks skipped)."""
    out = []
    for block in blocks(text):
        if block.lower().startswith("note:"):
            continue
        for sentence in SENTENCE_RX.split(block):
            sentence = sentence.strip()
            if REQ_RX.search(sentence) and 20 <= len(sentence) <= 500:
                out.append(sentence)
    return out


def duplicates_and_vague(statements_md: str) -> tuple[list[str], list[str]]:
    """The '- ' statements of a file that occur more than once (ignoring case and punctuation), and the
    short ones with a word too vague to test."""
    seen: dict[str, int] = {}
    dups, vague = [], []
    for ln in statements_md.splitlines():
        if not ln.startswith("- "):
            continue
        key = re.sub(r"[^a-z0-9 ]", "", ln[2:].lower()).strip()
        seen[key] = seen.get(key, 0) + 1
        if seen[key] == 2:
            dups.append(ln[2:])
        if VAGUE_RX.search(CODE_SPAN_RX.sub("", ln)) and len(ln) < 120:  # `Secure` is a name, not a wish
            vague.append(ln[2:])
    return dups, vague


# -- the tasks --------------------------------------------------------------------------------
def chunk_heading(start: int, end: int, src: str) -> str:
    return f"## Lines {start}-{end} of {src}"


def heading_pattern(heading: str) -> str:
    """A search_files pattern for exactly this heading line."""
    return "^" + re.escape(heading) + r"\s*$"


def found_in(result: str, path: str) -> bool:
    """Whether a search_files result has a hit in ``path``."""
    return any(ln.startswith(f"{path}:") for ln in result.splitlines())


def extract_chunk(v: View, task: str, start: int, end: int, src: str) -> Decision:
    """Read lines start-end of src and append their requirements to the output, unless it has them."""
    paths = paths_in(task.split(" into ", 1)[1]) if " into " in task else []
    out = paths[0] if paths else "requirements.md"
    heading = chunk_heading(start, end, src)
    probe_call = Call("search_files", {"pattern": heading_pattern(heading), "path": ".", "max_results": 5})
    probe = v.did("search_files", pattern=probe_call.args["pattern"])
    if v.did("append_file", path=out):
        return complete("Chunk done.")
    if probe is not None and probe.ok and found_in(probe.result, out):
        return complete(f"{out} already has the requirements of lines {start}-{end}; not adding them twice.")
    reads = [d for d in v.done if d.name == "read_file" and d.args.get("path") == src]
    if reads and not reads[-1].ok:
        return complete(f"Could not read {src}.",
                        Call("add_note", {"text": f"Could not read lines {start}-{end} of {src}: "
                                                  f"{reads[-1].result[:120]}"}))
    # A budget-limited read returns fewer lines than asked: read on from where it stopped.
    upto = start - 1
    for d in reads:
        m = RANGE_RX.match(d.result)
        if m and int(m.group(1)) <= upto + 1:
            upto = max(upto, int(m.group(2)))
    last = RANGE_RX.match(reads[-1].result) if reads else None
    if upto < end and not (last is not None and int(last.group(3)) <= upto):
        calls = [Call("read_file", {"path": src, "start_line": upto + 1, "max_lines": end - upto})]
        if probe is None:
            calls.append(probe_call)  # in the same turn: is this chunk already in the output?
        return Decision(f"Reading lines {upto + 1}-{end} of {src}.", calls)
    if probe is None:
        return Decision(f"Checking whether {out} already has lines {start}-{end}.", [probe_call])
    found = extract_requirements("\n".join(body(d.result) for d in reads if d.ok))
    block = [f"\n{heading}", ""]
    block += [f"- {s}" for s in found] or ["- (no requirement statements in this range)"]
    return complete(
        f"Found {len(found)} requirement statements in lines {start}-{end}.",
        Call("append_file", {"path": out, "content": "\n".join(block) + "\n"}),
        Call("add_accomplishment", {"text": f"Extracted {len(found)} requirements from lines {start}-{end} "
                                            f"of {src} into {out}"}),
    )


def duplicates(v: View, task: str) -> Decision:
    """Find the statements of a file that appear twice, and the vague ones; write them to review notes."""
    paths = paths_in(task)
    src = paths[0] if paths else "requirements.md"
    if not v.did("read_file", path=src):
        return Decision(f"Reading {src} to look for duplicates.", [Call("read_file", {"path": src,
                                                                                      "max_lines": 400})])
    result = v.read_result(src) or ""
    dups, vague = duplicates_and_vague(body(result))
    out = paths[1] if len(paths) > 1 else "review_notes.md"
    text = ["# Review Notes", "", "## Duplicate statements", *([f"- {d}" for d in dups] or ["- none found"]),
            "", "## Too vague to test", *([f"- {x}" for x in vague] or ["- none found"]), ""]
    if (scope := partial_scope(result)) is not None:
        text += [f"Checked {scope} of {src}: the rest did not fit in one read.", ""]
    return complete(f"Found {len(dups)} duplicates and {len(vague)} vague statements.",
                    Call("write_file", {"path": out, "content": "\n".join(text)}),
                    Call("add_accomplishment", {"text": f"Wrote {out}"}))


def count_statements(v: View, task: str) -> Decision:
    """Note how many statements a file holds, by keyword; it says so when it saw only part of the file."""
    target = next((p for p in paths_in(task) if p.endswith(".md")), None) or next(
        (p for p in paths_in(v.instructions() or "") if "requirement" in p), "requirements.md")
    result = v.read_result(target)
    if result is None:
        return Decision(f"Reading {target} to count.", [Call("read_file", {"path": target, "max_lines": 400})])
    items = [ln for ln in body(result).splitlines() if ln.startswith("- ")]
    counts = {k: sum(1 for ln in items if re.search(r"\b" + k + r"\b", ln, re.IGNORECASE)) for k in KEYWORDS}
    summary = ", ".join(f"{n} with '{k}'" for k, n in counts.items())
    scope = partial_scope(result)
    where = f" in {scope} (the rest did not fit in one read)" if scope else ""
    return once(v, Call("add_note", {"text": f"{target}: {len(items)} statements{where} ({summary})"}),
                "Recording the counts.")


def partial_scope(read_result: str) -> str | None:
    """"lines A-B of N" when a read_file result holds only part of its file, else None."""
    m = RANGE_RX.match(read_result)
    if m is None or int(m.group(2)) >= int(m.group(3)):
        return None
    return f"lines {m.group(1)}-{m.group(2)} of {m.group(3)}"
