"""The gateway's MCP endpoint: a session's environment tools as an MCP server (streamable HTTP) at
``/sessions/{id}/mcp``, so an agent command reaches them as it reaches any MCP server
(``VERIGYM_MCP_URL``).

A session opened with ``tools=SessionTools(...)`` (``Gateway.open``) serves them; any carrier names the
session, as on the other routes (the ``SessionRouter`` resolves it first: unknown 401, closed 409). A
session without tools answers 404.

- ``tools/list``: one MCP tool per schema of the environment's ``tool_schemas()`` (what the environment
  offers the model): its name, description and JSON-schema parameters as the ``inputSchema``.
- ``tools/call``: runs the call exactly as the environment's own harness does (``SessionTools.run``:
  ``env.run_call(ToolCall(...), state)`` with the rollout's state, on the rollout's event loop), and
  answers its text as one text content. An unknown tool, bad arguments, a tool that raised or timed out
  come back as the environment's ``Error: ...`` text, with ``isError`` set: ``isError`` is true exactly
  when the text starts with ``Error:`` (the environment's marker of a failed call). The arguments are
  not checked against the schema before the call; the environment's runner checks them, so the agent
  gets the same text the model would.

One low-level MCP ``Server`` serves every session: its ``StreamableHTTPSessionManager`` runs stateless
(a fresh transport per request, no ``Mcp-Session-Id``: the rollout's state lives in the gateway session,
not in an MCP session) with JSON responses. The endpoint puts the session's tools into the request's ASGI
scope, and the handlers read them back from the request (``ctx.request.scope``), since the manager runs
handlers in its own tasks. The manager starts on the first MCP request, in a task on the gateway's event
loop, and ends with the loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.types import Receive, Scope, Send

from verigym._asgi_guard import send_json
from verigym.gateway._recording import CURRENT
from verigym.tools import tool_parts

if TYPE_CHECKING:
    import mcp_types
    from mcp.server.context import ServerRequestContext
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.applications import Starlette

    from verigym.gateway._sessions import Sessions

__all__ = ["ERROR_PREFIX", "McpEndpoint", "SessionTools", "add_mcp_route"]

ERROR_PREFIX = "Error:"  # the environment's marker of a failed call: such a result has isError set
_SCOPE_KEY = "verigym.session_tools"


@dataclass(frozen=True)
class SessionTools:
    """One rollout's tools: ``schemas`` as the environment offers them (``tool_schemas()``: OpenAI
    function tools, or bare ``{"name", "description", "parameters"}``), and ``run(name, arguments_json)``,
    which answers as the environment's harness does (its text, ``Error: ...`` on failure). ``loop``: the
    event loop ``run`` belongs to (the rollout's); calls are run there. None: on the gateway's loop."""

    schemas: Sequence[Mapping[str, Any]]
    run: Callable[[str, str], Awaitable[str]]
    loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)

    def listed(self) -> list[mcp_types.Tool]:
        import mcp_types

        return [
            mcp_types.Tool(name=name, description=description, input_schema=params)
            for name, description, params in tool_parts(self.schemas)
        ]

    async def call(self, name: str, arguments: Mapping[str, Any] | None) -> str:
        async def run() -> str:
            return await self.run(name, json.dumps(dict(arguments or {})))

        if self.loop is None or self.loop is asyncio.get_running_loop():
            return await run()
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(run(), self.loop))


def _tools(ctx: ServerRequestContext[Any, Any]) -> SessionTools:
    scope = getattr(ctx.request, "scope", None)
    tools = scope.get(_SCOPE_KEY) if isinstance(scope, Mapping) else None
    if not isinstance(tools, SessionTools):
        raise RuntimeError("no session tools on this request")  # the endpoint always sets them
    return tools


async def _list_tools(
    ctx: ServerRequestContext[Any, Any], params: mcp_types.PaginatedRequestParams | None
) -> mcp_types.ListToolsResult:
    import mcp_types

    return mcp_types.ListToolsResult(tools=_tools(ctx).listed())


async def _call_tool(
    ctx: ServerRequestContext[Any, Any], params: mcp_types.CallToolRequestParams
) -> mcp_types.CallToolResult:
    import mcp_types

    text = await _tools(ctx).call(params.name, params.arguments)
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=text)], is_error=text.startswith(ERROR_PREFIX)
    )


class McpEndpoint:
    """The ASGI app of the gateway's ``/mcp`` route (module doc); the router has set ``CURRENT``."""

    def __init__(self, sessions: Sessions) -> None:
        from mcp.server.lowlevel import Server
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        self.sessions = sessions
        self.server: Server[Any] = Server(
            "verigym-env-tools", on_list_tools=_list_tools, on_call_tool=_call_tool
        )
        self.manager: StreamableHTTPSessionManager = StreamableHTTPSessionManager(
            self.server, json_response=True, stateless=True
        )
        self._ready: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._failed: BaseException | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        call = CURRENT.get()
        live = None if call is None else self.sessions.live(call.session)
        if call is None or live is None:
            await _reply(send, 409, f"session {getattr(call, 'session', '?')!r} has ended")
            return
        if not isinstance(live.tools, SessionTools):
            await _reply(send, 404, f"session {call.session!r} has no tools: its environment offers none")
            return
        await self._started()
        await self.manager.handle_request({**scope, _SCOPE_KEY: live.tools}, receive, send)

    async def _started(self) -> None:
        if self._ready is None:  # the first MCP request: start the manager on this loop, for good
            self._ready = asyncio.Event()
            # a fresh context: the manager's tasks outlive this request and must not carry its CURRENT
            self._task = asyncio.get_running_loop().create_task(self._run(), context=contextvars.Context())
        await self._ready.wait()
        if self._failed is not None:
            raise RuntimeError(f"the gateway's MCP server did not start: {self._failed!r}")

    async def _run(self) -> None:
        assert self._ready is not None
        try:
            async with self.manager.run():
                self._ready.set()
                await asyncio.Event().wait()  # until the gateway's loop ends (its tasks are cancelled)
        except BaseException as exc:
            self._failed = self._failed or exc
            raise
        finally:
            self._ready.set()


async def _reply(send: Send, status: int, message: str) -> None:
    """A JSON-RPC error body (no id), as the MCP SDK answers a request it refuses."""
    await send_json(
        send, status, {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": message}}
    )


def add_mcp_route(app: Starlette, sessions: Sessions) -> McpEndpoint:
    """Serve the sessions' tools at ``/mcp`` of ``app`` (``/sessions/{id}/mcp`` once the router has
    stripped the prefix)."""
    from starlette.routing import Route

    endpoint = McpEndpoint(sessions)
    app.router.routes.append(Route("/mcp", endpoint=endpoint, methods=["GET", "POST", "DELETE"]))
    return endpoint
