"""The job's `publish` tool: records the release in published.txt (a stand-in for an upload)."""

import pathlib

pathlib.Path("published.txt").write_text("release 1.4.0 published\n")
print("published release 1.4.0 (see published.txt)")
