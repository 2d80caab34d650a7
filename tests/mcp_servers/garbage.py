"""An MCP server that answers tools/call with garbage (tests/integration/test_mcp_start.py), speaking the protocol by
hand (the SDK's server would not send it): a line that is not JSON, then, by its tool,

- ``string``: an answer whose ``result`` is a string, not an object;
- ``shape``: an answer whose ``result`` is an object, but not a tool's result (``content`` is a number);
- ``silent``: nothing more (the call waits out its timeout)."""

from __future__ import annotations

import json
import sys

TOOLS = [{"name": name, "inputSchema": {"type": "object"}} for name in ("string", "shape", "silent")]


def send(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    message = json.loads(line)
    ident, method = message.get("id"), message.get("method")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": ident, "result": {
            "protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "garbage", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": ident, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        sys.stdout.write("this line is not JSON\n")
        sys.stdout.flush()
        tool = message["params"]["name"]
        if tool == "string":
            send({"jsonrpc": "2.0", "id": ident, "result": "a string not an object"})
        elif tool == "shape":
            send({"jsonrpc": "2.0", "id": ident, "result": {"content": 7}})
    elif ident is not None:
        send({"jsonrpc": "2.0", "id": ident, "result": {}})
