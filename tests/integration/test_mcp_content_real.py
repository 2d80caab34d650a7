"""A real server no one here wrote answers with an image, embedded resources and resource links, in a whole run:
``@modelcontextprotocol/server-everything`` (npm) run confined by the machine's Node (see tests/integration/
test_mcp_real.py: skipped with the reason unless ``TEST_MCP_NPM_PREFIX`` names where
tests/mcp_servers/install_everything.sh installed it). Its image and resources land under ``mcp-output/every/``, and
the agent reads where; its links are named, never fetched. Over streamable HTTP, its image reaches the engine too."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest

from console.engine import events as ev
from console.engine.tools.mcp_config import McpServerConfig
from console.engine.tools.mcp_content import McpBlock
from console.mcp.client import start_servers
from console.mcp.http import HttpServer
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedTurn as T
from tests.commands_support import bwrap  # noqa: F401  (the fixture)
from tests.integration.test_mcp import results, run
from tests.integration.test_mcp_real import NODE, _port, everything, node_world  # noqa: F401  (the fixture)

SAVED = re.compile(r"\(([^,()]+), ([\d,]+) bytes\): saved as (mcp-output/every/[0-9a-f]{12}-\d+\.[a-z]+)")


def test_server_everythings_image_and_resources_are_saved_into_the_job_folder(
        make_job, everything: Path, bwrap, clock, tmp_path: Path) -> None:  # noqa: F811
    job = make_job()
    assert NODE is not None
    config = McpServerConfig(name="every", command=[NODE, str(everything.resolve()), "stdio"], required=True,
                             tools=["get-tiny-image", "get-resource-reference", "get-resource-links"])
    (server,), _ = start_servers([config], str(job.root), node_world(everything))
    script = [T(calls=[C(name="mcp__every__get-tiny-image", arguments={})]),
              T(calls=[C(name="mcp__every__get-resource-reference", arguments={"resourceType": "Text",
                                                                                 "resourceId": 1})]),
              T(calls=[C(name="mcp__every__get-resource-reference", arguments={"resourceType": "Blob",
                                                                                 "resourceId": 2})]),
              T(calls=[C(name="mcp__every__get-resource-links", arguments={"count": 2})]),
              T(error="end of script")]
    try:
        run(job, [server], script, clock, tmp_path)
    finally:
        server.close()
    image, text, blob, links = results(job)
    assert all(r.ok for r in (image, text, blob, links))
    # The image: its text around it kept, the PNG saved whole.
    assert "Here's the image you requested:" in image.content and "The image above is the MCP logo." in image.content
    ((mime, size, rel),) = SAVED.findall(image.content)
    data = (job.root / rel).read_bytes()
    assert mime == "image/png" and rel.endswith(".png") and data.startswith(b"\x89PNG\r\n\x1a\n")
    assert len(data) == int(size.replace(",", ""))
    # The resources: a text one and a blob one, each a file of its own, named by the harness.
    for got in (text, blob):
        ((mime, size, rel),) = SAVED.findall(got.content)
        saved = (job.root / rel).read_bytes()
        assert mime == "text/plain" and rel.endswith(".txt") and len(saved) == int(size.replace(",", "")) > 0
        assert "demo://resource/" in got.content  # its uri, named
    # Links are named, not fetched: nothing saved.
    assert not SAVED.findall(links.content) and links.content.count("a link, not fetched") == 2
    assert len(list((job.root / "mcp-output" / "every").iterdir())) == 3
    assert not [e for e in ev.read_events(job.events) if isinstance(e, ev.ErrorEvent) and e.where == "tool"]


def test_server_everythings_image_over_streamable_http_reaches_the_engine(
        tmp_path: Path, everything: Path) -> None:  # noqa: F811
    assert NODE is not None
    port = _port()
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PORT": str(port)}
    proc = subprocess.Popen([NODE, str(everything), "streamableHttp"], env=env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(300):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"server-everything did not start: {proc.stderr.read()[-500:]!r}")  # type: ignore[union-attr]
                time.sleep(0.1)
        url = f"http://127.0.0.1:{port}/mcp"
        server = HttpServer(McpServerConfig(name="every", url=url), [url], {})
        try:
            answer = server.call("get-tiny-image", {}, 30)
        finally:
            server.close()
    finally:
        proc.kill()
        proc.wait(10)
    assert answer.ok and "Here's the image you requested:" in answer.text
    ((kind, mime, data),) = [(b.kind, b.mime, b.data) for b in answer.blocks]
    assert (kind, mime) == ("image", "image/png") and data is not None and data.startswith(b"\x89PNG\r\n\x1a\n")


def test_an_http_servers_block_that_echoes_its_credential_is_not_saved() -> None:
    # The credential the operator gave an HTTP server is cut out of its words, and content that holds it is not saved.
    server = HttpServer.__new__(HttpServer)
    server._secrets = ["s3cret-token"]
    echoed = server._hide_block(McpBlock("image", "image/png", b"\x89PNG s3cret-token", 17, uri="x://s3cret-token"))
    assert echoed.data is None and echoed.why == "it holds a credential of the server's"
    assert "s3cret" not in echoed.uri
    clean = server._hide_block(McpBlock("image", "image/png", b"\x89PNG", 4))
    assert clean.data == b"\x89PNG"
