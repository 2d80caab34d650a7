"""The release checks the job's `test` tool runs: every file the release needs exists and is not empty."""

import pathlib
import sys

missing = [p for p in ("CHANGELOG.md", "release_notes.md") if not pathlib.Path(p).is_file()
           or not pathlib.Path(p).read_text().strip()]
if missing:
    print("FAIL: missing or empty:", ", ".join(missing))
    sys.exit(1)
print("ok: CHANGELOG.md and release_notes.md are ready")
