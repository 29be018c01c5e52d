"""``MCPTools``: the tools of an MCP server (stdio or streamable HTTP) as verigym ``Tool`` objects.

::

    with MCPTools(command=["python", "my_server.py"]) as mcp:   # or MCPTools(url="http://127.0.0.1:8000/mcp")
        env = MyToolEnv(mcp.tools)          # any ToolEnv
        ...                                  # rollouts call the server

Over stdio the server is started as a subprocess; with ``url`` an already running server is
reached over the streamable-HTTP transport. Either way it is spoken to with the official ``mcp``
SDK (``ClientSession`` over ``stdio_client`` / ``streamable_http_client``). The session lives on its own event loop in a
background thread, so the tools work from any event loop (``asyncio.run`` in ``check_env``,
the eval runner, a notebook) and ``MCPTools`` can be built synchronously, e.g. in an
environment's constructor. ``close()`` (or leaving the ``with``) stops the server.

Each MCP tool becomes a ``Tool`` with the server's name (optionally prefixed), description
and JSON input schema; arguments are checked against the schema's property names and basic
types before the call. A result with ``is_error`` raises ``MCPToolError`` (a ``ToolEnv`` tells
the model ``Error: ...``); a server that cannot start raises ``MCPError`` with the reason.
The server's stderr goes to ``errlog`` (default: discarded), never to the terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from typing import Any, Literal, TextIO

import pydantic
from pydantic import ConfigDict

from verigym.tools._tool import Tool, strip_titles

__all__ = ["MCPError", "MCPToolError", "MCPTools"]

_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}


class MCPError(RuntimeError):
    """The MCP server could not be started or reached; the message says why."""


class MCPToolError(RuntimeError):
    """An MCP tool answered with an error result."""


class _Missing:
    def __repr__(self) -> str:
        return "<not given>"


_MISSING: Any = _Missing()


def _args_model(name: str, schema: Mapping[str, Any]) -> type[pydantic.BaseModel]:
    props: Mapping[str, Any] = schema.get("properties") or {}
    required = set(schema.get("required") or ())
    fields: dict[str, Any] = {}
    for pname, spec in props.items():
        kind = spec.get("type") if isinstance(spec, Mapping) else None
        annotation = _TYPES.get(kind, Any) if isinstance(kind, str) else Any
        default = ... if pname in required else _MISSING
        fields[pname] = (annotation if pname in required else annotation | _Missing, default)  # type: ignore[operator]
    extra: Literal["allow", "forbid"] = "allow" if schema.get("additionalProperties") is True else "forbid"
    return pydantic.create_model(  # type: ignore[call-overload, no-any-return]
        f"{name}_arguments", __config__=ConfigDict(extra=extra, arbitrary_types_allowed=True), **fields
    )


def _reason(exc: BaseException) -> str:
    """The innermost cause of a failure (the SDK wraps transport errors in exception groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


class MCPTools:
    """Start an MCP server over stdio and expose its tools as ``self.tools`` (see the module docstring)."""

    def __init__(
        self,
        command: Sequence[str] | None = None,
        *,
        url: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        prefix: str = "",
        startup_timeout_s: float = 30.0,
        call_timeout_s: float | None = 60.0,
        errlog: TextIO | None = None,
    ) -> None:
        if bool(command) == bool(url):
            raise ValueError("MCPTools needs a command (e.g. ['python', 'server.py']) or a url, not both")
        self.command = list(command or [])
        self.url = url
        where = url or self.command
        self.prefix = prefix
        self.call_timeout_s = call_timeout_s
        self._errlog = errlog if errlog is not None else open(os.devnull, "w")  # noqa: SIM115
        self._own_errlog = errlog is None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="verigym-mcp", daemon=True)
        self._thread.start()
        self._session: Any = None
        self._stop: asyncio.Event | None = None
        self._main: Future[None] | None = None
        self.tools: tuple[Tool, ...] = ()
        ready: Future[list[Any]] = Future()
        self._main = asyncio.run_coroutine_threadsafe(self._serve(ready, dict(env or {}), cwd), self._loop)
        try:
            listed = ready.result(timeout=startup_timeout_s)
        except TimeoutError:
            self.close()
            raise MCPError(f"MCP server {where} did not start within {startup_timeout_s}s") from None
        except Exception as exc:
            self.close()
            raise MCPError(f"MCP server {where} failed to start: {_reason(exc)}") from None
        self.tools = tuple(self._wrap(t) for t in listed)

    async def _serve(self, ready: Future[list[Any]], env: dict[str, str], cwd: str | None) -> None:
        from mcp import ClientSession, StdioServerParameters
        from mcp.client.stdio import stdio_client
        from mcp.client.streamable_http import streamable_http_client

        self._stop = asyncio.Event()
        if self.url:
            transport: Any = streamable_http_client(self.url)
        else:
            params = StdioServerParameters(
                command=self.command[0], args=self.command[1:], env={**os.environ, **env}, cwd=cwd
            )
            transport = stdio_client(params, errlog=self._errlog)
        try:
            async with transport as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                listed = await session.list_tools()
                self._session = session
                ready.set_result(list(listed.tools))
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            elif not isinstance(exc, asyncio.CancelledError | Exception):
                raise

    def _wrap(self, spec: Any) -> Tool:
        """One server tool as a verigym ``Tool``."""
        remote = str(spec.name)
        schema = strip_titles(dict(spec.input_schema or {"type": "object", "properties": {}}))
        schema.setdefault("properties", {})
        model = _args_model(remote, schema)

        async def call(**kwargs: Any) -> str:
            args = {k: v for k, v in kwargs.items() if v is not _MISSING}
            return await self.call(remote, args)

        return Tool(
            fn=call,
            name=f"{self.prefix}{remote}",
            description=str(spec.description or ""),
            parameters=schema,
            args_model=model,
        )

    async def call(self, name: str, arguments: dict[str, Any]) -> str:
        """Call the server's tool ``name``; its text content joined, or ``MCPToolError``."""
        if self._session is None:
            raise MCPError("the MCP server is closed")
        session = self._session
        coro = session.call_tool(name, arguments, read_timeout_seconds=self.call_timeout_s)
        result = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))
        parts = []
        for item in getattr(result, "content", None) or ():
            text = getattr(item, "text", None)
            parts.append(text if isinstance(text, str) else f"[{getattr(item, 'type', 'content')}]")
        text = "\n".join(parts)
        if not parts and getattr(result, "structured_content", None) is not None:
            import json

            text = json.dumps(result.structured_content)
        if getattr(result, "is_error", False):
            raise MCPToolError(text or f"MCP tool {name!r} failed")
        return text

    def close(self) -> None:
        """Stop the server and the background loop (idempotent)."""
        if self._loop.is_closed():
            return
        stop = self._stop
        if stop is not None:
            self._loop.call_soon_threadsafe(stop.set)
        if self._main is not None:
            with contextlib.suppress(Exception):  # the server's shutdown error changes nothing here
                self._main.result(timeout=10)
        self._session = None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()
        if self._own_errlog:
            self._errlog.close()

    def __enter__(self) -> MCPTools:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # a forgotten close() must not leave a server process behind
        try:
            if not self._loop.is_closed():
                self.close()
        except Exception:
            pass
