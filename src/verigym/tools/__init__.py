"""Tools: typed Python callables offered to a model, with the JSON schema taken from their signature.

- ``_tool``: ``Tool``, the ``@tool`` decorator, per-episode ``State``, ``strip_titles`` and ``tool_parts`` (a
  tool schema's name, description and parameters; re-exported here);
- ``_mcp``: ``MCPTools``, an MCP server's tools as verigym tools (re-exported here);
- ``variants``: seeded tool-set variations (renamed tools and arguments, reworded descriptions,
  distractors) that ``ToolEnv(tool_variant=SEED)`` offers.
"""

from verigym.tools._mcp import MCPError, MCPToolError, MCPTools
from verigym.tools._tool import STATE, State, Tool, ToolArgumentError, strip_titles, tool, tool_parts

__all__ = [
    "STATE",
    "MCPError",
    "MCPToolError",
    "MCPTools",
    "State",
    "Tool",
    "ToolArgumentError",
    "strip_titles",
    "tool",
    "tool_parts",
]
