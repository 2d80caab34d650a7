"""A fake World for the guardrails tests (a set of files, counted questions), and the tests of the fake."""

from __future__ import annotations


class FakeWorld:
    """The job folder as a set of normalized paths. Normalizes like the sandbox: "./a//b.txt" is "a/b.txt";
    absolute paths, ".." and the harness's .console/ are refused (None)."""

    def __init__(self, *files: str) -> None:
        self.files: set[str] = set()
        self.stats = 0
        self.normalizations = 0
        for f in files:
            self.add(f)

    @staticmethod
    def _norm(path: str) -> str | None:
        if not isinstance(path, str) or not path or path.startswith("/") or "\x00" in path:
            return None
        parts = [p for p in path.split("/") if p not in ("", ".")]
        if not parts or ".." in parts or parts[0] == ".console":
            return None
        return "/".join(parts)

    def add(self, path: str) -> None:
        norm = self._norm(path)
        assert norm is not None
        self.files.add(norm)

    def remove(self, path: str) -> None:
        self.files.discard(self._norm(path) or "")

    def normalize(self, path: str) -> str | None:
        self.normalizations += 1
        return self._norm(path)

    def file_exists(self, path: str) -> bool:
        self.stats += 1
        norm = self._norm(path)
        return norm is not None and norm in self.files


def test_fake_world_normalizes_like_the_sandbox() -> None:
    world = FakeWorld("a/b.txt")
    assert world.normalize("./a//b.txt") == "a/b.txt"
    assert world.file_exists("./a//b.txt")
    assert world.normalize("../x") is None
    assert world.normalize("/etc/passwd") is None
    assert world.normalize(".console/todos.json") is None
    assert not world.file_exists("../a/b.txt")
