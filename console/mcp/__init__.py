"""The Model Context Protocol client: a job's ``[[mcp]]`` servers started confined, implementing the engine's
:class:`console.engine.tools.mcp_tools.McpServer` port with the official ``mcp`` SDK (see docs/mcp.md)."""
