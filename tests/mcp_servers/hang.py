"""An MCP server that never answers (tests/integration/test_mcp_start.py): it reads its first line, writes its pid
into the file its argument names (the test's sign that it runs), and sleeps."""

from __future__ import annotations

import os
import sys
import time

sys.stdin.readline()
with open(sys.argv[1] + ".tmp", "w") as fh:
    fh.write(str(os.getpid()))
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(3600)
