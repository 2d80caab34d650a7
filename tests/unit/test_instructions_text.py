"""A job's instructions.md is checked before a run starts by the same test of "binary" read_file uses, so that
the two agree: a file the check lets through is one read_file reads, and a file read_file refuses is refused
up front (it was accepted, and the run went round read_file and todo_complete until stuck)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from console.engine.job_files import JobError, JobPaths, check_instructions
from console.engine.text import BINARY_SAMPLE, looks_binary


def _job(tmp_path: Path, data: bytes) -> JobPaths:
    (tmp_path / "instructions.md").write_bytes(data)
    return JobPaths(tmp_path)


def _refusal(paths: JobPaths) -> str | None:
    try:
        check_instructions(paths)
    except JobError as exc:
        return str(exc)
    return None


def test_random_bytes_are_refused_naming_the_file_and_the_nul(tmp_path) -> None:
    data = os.urandom(5000).replace(b"\x00", b"a")[:100] + b"\x00" + os.urandom(4899)
    why = _refusal(_job(tmp_path, data))
    assert why is not None and why.startswith(f"{tmp_path}: instructions.md is a binary file")
    assert "a NUL byte at byte 100" in why and "\n" not in why


def test_text_that_is_not_utf8_is_refused_at_its_byte(tmp_path) -> None:
    why = _refusal(_job(tmp_path, "# Tâche\n".encode("latin-1")))
    assert why == f"{tmp_path}: instructions.md is not UTF-8 text (byte 3 is not); it must be a Markdown file " \
                  "with the task, saved as UTF-8"


def test_the_byte_is_counted_across_the_chunks_read(tmp_path) -> None:
    # A character cut by a read's end is whole text; a bad byte far in is named where it is.
    head = "é".encode() * 40000  # 80,000 bytes: a chunk of 65,536 ends inside a character
    assert _refusal(_job(tmp_path, head + b"\n")) is None
    assert _refusal(_job(tmp_path, head + b"\xff")) is not None
    assert "(byte 80,000 is not)" in (_refusal(_job(tmp_path, head + b"\xff")) or "")
    assert "ends within a character, at byte 80,000" in (_refusal(_job(tmp_path, head + "é".encode()[:1])) or "")


@pytest.mark.parametrize("at", [0, BINARY_SAMPLE - 1, BINARY_SAMPLE, 70000])
def test_the_check_and_read_files_test_agree_on_a_nul(tmp_path, at: int) -> None:
    data = b"x" * at + b"\x00" + b"y" * 100
    refused = _refusal(_job(tmp_path, data)) is not None
    assert refused == looks_binary(data) == (at < BINARY_SAMPLE)


def test_an_ordinary_task_passes(tmp_path) -> None:
    assert _refusal(_job(tmp_path, "# Task\n\nWrite hello.txt — with ünïcode.\n".encode())) is None
    assert _refusal(_job(tmp_path, b"")) is None
