"""MCP servers from the command line and configs: ``--mcp "CMD ARGS"`` / ``--mcp URL`` and ``[[tools.mcp]]``.

::

    [[tools.mcp]]
    command = ["python", "my_server.py"]       # stdio: started for the run, stopped after it
    prefix = "fs_"                              # optional: prepended to the server's tool names
    [[tools.mcp]]
    url = "http://127.0.0.1:8000/mcp"          # streamable HTTP: a server that is already running

``verigym.envs.prepare.prepare_env`` starts or reaches each server and adds its tools to a tool
environment (``ToolEnv``) next to the tools it already has.
"""

from __future__ import annotations

import shlex
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["McpServerSpec", "ToolsSpec", "parse_mcp_flag"]


class McpServerSpec(BaseModel):
    """One ``[[tools.mcp]]`` entry: ``command`` (stdio) or ``url`` (streamable HTTP)."""

    model_config = ConfigDict(extra="forbid")

    command: list[str] | None = None
    url: str | None = None
    prefix: str = ""
    env: dict[str, str] = Field(default_factory=dict)
    startup_timeout_s: Annotated[float, Field(gt=0)] = 30.0
    call_timeout_s: Annotated[float, Field(gt=0)] = 60.0

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSpec:
        if bool(self.command) == bool(self.url):
            raise ValueError("give exactly one of command (stdio) or url (streamable HTTP)")
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url {self.url!r} must start with http:// or https://")
        return self

    @property
    def where(self) -> str:
        return self.url or shlex.join(self.command or [])


class ToolsSpec(BaseModel):
    """The ``[tools]`` table of eval and train configs."""

    model_config = ConfigDict(extra="forbid")

    mcp: list[McpServerSpec] = Field(default_factory=list)


def parse_mcp_flag(value: str) -> McpServerSpec:
    """``--mcp "python server.py --flag"`` (stdio) or ``--mcp http://HOST:PORT/mcp`` (HTTP)."""
    text = value.strip()
    if text.startswith(("http://", "https://")):
        return McpServerSpec(url=text)
    try:
        command = shlex.split(text)
    except ValueError as exc:
        raise ValueError(f"--mcp {value!r}: {exc}") from None
    if not command:
        raise ValueError("--mcp needs a command (e.g. --mcp 'python server.py') or an http:// URL")
    return McpServerSpec(command=command)
