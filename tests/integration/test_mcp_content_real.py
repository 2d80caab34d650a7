"""A real server no one here wrote answers with an image, embedded resources and resource links, in a whole run:
``@modelcontextprotocol/server-everything`` (npm) run confined by the machine's Node (see tests/integration/
test_mcp_real.py: skipped with the reason unless ``TEST_MCP_NPM_PREFIX`` names where
tests/mcp_servers/install_everything.sh installed it). Its image and resources land under ``mcp-output/every/``, and
the agent reads where; its links are named, never fetched."""

from __future__ import annotations

import re
from pathlib import Path

from console.engine import events as ev
from console.engine.tools.mcp_config import McpServerConfig
from console.mcp.client import start_servers
from console.providers.scripted import ScriptedCall as C
from console.providers.scripted import ScriptedTurn as T
from tests.commands_support import bwrap  # noqa: F401  (the fixture)
from tests.integration.test_mcp import results, run
from tests.integration.test_mcp_real import NODE, everything, node_world  # noqa: F401  (the fixture)

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
