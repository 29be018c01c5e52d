"""A small MCP server for the --mcp tests: ``add`` and ``shout``, over stdio or streamable HTTP.

``python agentic_mcp_server.py`` (stdio) or ``python agentic_mcp_server.py --http PORT``
(streamable HTTP at ``http://127.0.0.1:PORT/mcp``).
"""

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("agentic-test-server")


@server.tool()
def add(a: int, b: int = 1) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """The text in capitals."""
    return text.upper()


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
