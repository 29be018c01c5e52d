"""What a config or the command line adds to ANY environment: cheating penalties and MCP tools.

``prepare_env(env, penalties, mcp)`` is called by ``verigym eval`` and ``verigym train`` right after
an environment is built: ``[[rubric.penalties]]`` (``verigym.graders.penalties``) join its rubric,
and the tools of every ``[[tools.mcp]]`` server (``verigym.tools.mcp_config``) join its tools, next
to the tools it already has (a tool variant, when set, is redrawn over all of them). Problems are one
``EnvError`` line naming the entry: an environment that is not a ``ToolEnv`` given MCP servers, a
server that cannot start, a tool or penalty name that clashes. MCP servers started here are stopped
by ``close_servers`` (and at interpreter exit, whatever happens).
"""

from __future__ import annotations

import atexit
import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from verigym.envs.registry import EnvError

if TYPE_CHECKING:
    from verigym.envs.base import Environment
    from verigym.graders.penalties import PenaltySpec
    from verigym.tools import MCPTools
    from verigym.tools.mcp_config import McpServerSpec

__all__ = ["add_penalties", "attach_mcp", "close_servers", "prepare_env"]

_OPEN: list[MCPTools] = []


def add_penalties(env: Environment, specs: Sequence[PenaltySpec]) -> None:
    """Add ``specs`` to ``env``'s rubric (its own penalties stay). Names must not clash."""
    from verigym.graders.penalties import build_penalty

    if not specs:
        return
    rubric = env.rubric
    taken = {p.grader.name for p in rubric.all_penalties}
    for spec in specs:
        if spec.key in taken:
            raise ValueError(
                f"rubric.penalties {spec.key}: the environment already has a penalty of that name; "
                "give this one another name ="
            )
    added = tuple(build_penalty(s) for s in specs)
    env.rubric = dataclasses.replace(rubric, penalties=(*rubric.penalties, *added))


def attach_mcp(env: Environment, specs: Sequence[McpServerSpec]) -> list[MCPTools]:
    """Add the tools of every server in ``specs`` to ``env``; returns the servers to close after the run."""
    from verigym.envs.tool import ToolEnv
    from verigym.tools import MCPError, MCPTools

    if not specs:
        return []
    if not isinstance(env, ToolEnv):
        raise ValueError(
            "--mcp / [[tools.mcp]]: this is not a tool environment (ToolEnv), so it cannot offer MCP tools"
        )
    opened: list[MCPTools] = []
    try:
        for spec in specs:
            try:
                server = MCPTools(
                    spec.command,
                    url=spec.url,
                    env=spec.env,
                    prefix=spec.prefix,
                    startup_timeout_s=spec.startup_timeout_s,
                    call_timeout_s=spec.call_timeout_s,
                )
            except MCPError as exc:
                raise ValueError(f"--mcp {spec.where}: {exc}") from None
            opened.append(server)
            clash = sorted({t.name for t in env.base_tools} & {t.name for t in server.tools})
            if clash:
                raise ValueError(
                    f"--mcp {spec.where}: tool {clash[0]!r} is already offered by the environment; "
                    "set a prefix ([[tools.mcp]] prefix = ...)"
                )
            env.base_tools = (*env.base_tools, *server.tools)
        variant = env.tool_variant
        env.apply_tool_variant(variant.seed if variant is not None else None)
    except BaseException:
        for server in opened:
            server.close()
        raise
    return opened


def prepare_env(
    env: Environment, penalties: Sequence[PenaltySpec] = (), mcp: Sequence[McpServerSpec] = ()
) -> list[MCPTools]:
    """Add ``penalties`` to ``env``'s rubric and the tools of the ``mcp`` servers to its tools."""
    name = getattr(env, "name", type(env).__name__)
    try:
        add_penalties(env, penalties)
        servers = attach_mcp(env, mcp)
    except ValueError as exc:
        raise EnvError(f"environment {name!r}: {exc}") from None
    if servers and not _OPEN:
        atexit.register(close_servers)
    _OPEN.extend(servers)
    return servers


def close_servers(servers: Sequence[MCPTools] | None = None) -> None:
    """Stop ``servers`` (default: every MCP server ``prepare_env`` started)."""
    chosen = list(_OPEN) if servers is None else list(servers)
    for server in chosen:
        server.close()
        if server in _OPEN:
            _OPEN.remove(server)
