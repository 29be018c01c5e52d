"""openenv's MCP surface: JSON-RPC 2.0 on ``POST /mcp`` and in ``{"type": "mcp"}`` WebSocket messages.

openenv's server and its ``MCPToolClient`` speak plain JSON-RPC here (a JSON request, a JSON response; no
MCP initialize handshake, no ``Accept: text/event-stream``), so this is that, not the MCP SDK's streamable
HTTP transport the gateway serves:

- ``tools/list`` → ``{"tools": [{name, description, inputSchema}]}``: the environment's tools;
- ``tools/call`` ``{name, arguments, session_id}`` → ``{"content": [{"type": "text", "text"}], "isError"}``:
  one model turn with that one tool call in the session (as openenv's ``CallToolAction`` step), so the
  call runs with the episode's own state and counts as a turn; ``isError`` when the environment answered
  ``Error: ...``;
- ``openenv/session/create`` (``params``: reset fields) → ``{"session_id"}``;
  ``openenv/session/close`` ``{session_id}`` → ``{"session_id", "closed": true}``.

Errors use JSON-RPC's codes: -32700 parse, -32600 invalid request, -32601 unknown method, -32602 bad
params (an unknown session), -32603 internal, -32000 server (full).
"""

from __future__ import annotations

import json
from typing import Any

from verigym.envserver._catalog import FieldError, tool_specs
from verigym.envserver._episode import StepError
from verigym.envserver._sessions import Full, Session, SessionTable
from verigym.types import Completion, ToolCall

__all__ = ["PARSE_ERROR", "handle_rpc", "rpc_error"]

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR, SERVER_ERROR = (
    -32700,
    -32600,
    -32601,
    -32602,
    -32603,
    -32000,
)


def rpc_error(code: int, message: str, request_id: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message, "data": None}}


def _ok(result: Any, request_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


async def handle_rpc(table: SessionTable, request: Any, ws_session: Session | None = None) -> dict[str, Any]:
    """One JSON-RPC request (already parsed JSON) → its response object."""
    if (
        not isinstance(request, dict)
        or request.get("jsonrpc") != "2.0"
        or not isinstance(request.get("method"), str)
    ):
        return rpc_error(
            INVALID_REQUEST, "Invalid request: expected {'jsonrpc': '2.0', 'method': str, 'params'?, 'id'?}"
        )
    request_id = request.get("id")
    if request_id is not None and (isinstance(request_id, bool) or not isinstance(request_id, (str, int))):
        return rpc_error(INVALID_REQUEST, "Invalid request: id must be a string or an integer")
    params = request.get("params", {})
    if not isinstance(params, dict):
        return rpc_error(INVALID_PARAMS, "Params must be an object", request_id)
    method = request["method"]
    try:
        if method == "tools/list":
            served = ws_session.served if ws_session is not None else table.served(params.get("env"))
            tools = [{"name": n, "description": d, "inputSchema": p} for n, d, p in tool_specs(served.env)]
            return _ok({"tools": tools}, request_id)
        if method == "tools/call":
            return await _call(table, params, ws_session, request_id)
        if method == "openenv/session/create":
            if ws_session is not None:
                return _ok({"session_id": ws_session.id}, request_id)
            session = await table.open(params)
            return _ok({"session_id": session.id}, request_id)
        if method == "openenv/session/close":
            target = params.get("session_id")
            if not isinstance(target, str) or not target:
                return rpc_error(INVALID_PARAMS, "Invalid params - 'session_id' is required", request_id)
            if ws_session is not None and target == ws_session.id:
                return rpc_error(
                    INVALID_REQUEST,
                    "Cannot close active WebSocket-managed session via MCP method",
                    request_id,
                )
            if not table.close(target):
                return rpc_error(INVALID_PARAMS, f"Unknown session_id: {target}", request_id)
            return _ok({"session_id": target, "closed": True}, request_id)
        return rpc_error(METHOD_NOT_FOUND, f"Method not found: {method}", request_id)
    except Full as exc:
        return rpc_error(SERVER_ERROR, str(exc), request_id)
    except (FieldError, LookupError, StepError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) else str(exc)
        return rpc_error(INVALID_PARAMS, message, request_id)


async def _call(
    table: SessionTable, params: dict[str, Any], ws_session: Session | None, request_id: Any
) -> dict[str, Any]:
    name, arguments = params.get("name"), params.get("arguments", {})
    if not isinstance(name, str) or not name:
        return rpc_error(INVALID_PARAMS, "Missing 'name' in params", request_id)
    if not isinstance(arguments, dict):
        return rpc_error(INVALID_PARAMS, "'arguments' must be an object", request_id)
    session = ws_session
    if session is None:
        sid = params.get("session_id")
        if not isinstance(sid, str):
            return rpc_error(
                INVALID_PARAMS, "'session_id' is required: create one with openenv/session/create", request_id
            )
        session = table.get(sid)
    call = ToolCall(id=f"call-{session.turn}", name=name, arguments=json.dumps(arguments))
    payload = await session.step_completion(Completion(tool_calls=(call,), finish_reason="tool_calls"))
    text = payload["observation"].get("result", "")
    return _ok(
        {"content": [{"type": "text", "text": text}], "isError": text.startswith("Error:")}, request_id
    )
