"""A small MCP server (stdio) for the MCPTools tests: arithmetic and a key-value note store."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("envs-test-server")
NOTES: dict[str, str] = {}


@server.tool()
def add(a: int, b: int = 1) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def save_note(key: str, text: str) -> str:
    """Save a note under a key."""
    NOTES[key] = text
    return f"saved {key}"


@server.tool()
def read_note(key: str) -> str:
    """Read the note saved under a key."""
    if key not in NOTES:
        raise ValueError(f"no note {key!r}")
    return NOTES[key]


if __name__ == "__main__":
    server.run("stdio")
