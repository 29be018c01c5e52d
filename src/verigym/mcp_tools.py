"""``MCPTools`` lives in :mod:`verigym.tools` (``tools/_mcp.py``); this path stays for existing imports."""

from verigym.tools import MCPError, MCPToolError, MCPTools

__all__ = ["MCPError", "MCPToolError", "MCPTools"]
