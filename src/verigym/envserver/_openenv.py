"""The OpenEnv surface of ``verigym env-server`` (openenv 0.10.0's ``http_server.py`` shapes), and verigym's
session routes beside it.

- ``WS /ws``: one session per connection (``reset``/``step``/``state``/``close``/``mcp`` messages; errors as
  ``{"type": "error", "data": {"message", "code"}}`` with openenv's codes);
- ``POST /reset``, ``POST /step`` (``X-Session-ID`` names the session: multi-step episodes over plain HTTP),
  ``GET /state``, ``GET /schema``, ``GET /metadata``, ``GET /health``, ``POST /mcp`` (``_jsonrpc``);
- ``GET``/``DELETE /sessions/{id}`` and ``POST /sessions/{id}/fork``.

The wire shapes are in ``docs/envserver.md``.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from fastapi import FastAPI, HTTPException, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse

from verigym.envserver._catalog import FieldError
from verigym.envserver._episode import StepError
from verigym.envserver._errors import http_error, read_json, session_header
from verigym.envserver._jsonrpc import PARSE_ERROR, handle_rpc, rpc_error
from verigym.envserver._sessions import Full, Session, SessionTable
from verigym.envserver._wire import check_depth

__all__ = ["add_openenv_routes"]

_ACTION_SCHEMA = {
    "title": "AssistantTurn",
    "type": "object",
    "properties": {
        "content": {"type": "string", "default": ""},
        "tool_calls": {"type": "array", "items": {"type": "object"}, "default": []},
        "finish_reason": {"type": "string", "enum": ["stop", "length", "tool_calls", "content_filter"]},
        "usage": {
            "type": "object",
            "properties": {"prompt_tokens": {"type": "integer"}, "completion_tokens": {"type": "integer"}},
        },
    },
}
_OBSERVATION_SCHEMA = {
    "title": "EpisodeObservation",
    "type": "object",
    "properties": {
        "session_id": {"type": "string"},
        "env": {"type": "string"},
        "task_id": {"type": "string"},
        "messages": {"type": "array", "items": {"type": "object"}},
        "reply": {"type": "array", "items": {"type": "object"}},
        "tools": {"type": ["array", "null"]},
        "sampling": {"type": "object"},
        "turn": {"type": "integer"},
        "stop_reason": {"type": "string"},
        "score": {"type": "object"},
        "error": {"type": ["object", "null"]},
        "done": {"type": "boolean"},
        "reward": {"type": ["number", "null"]},
    },
}
_STATE_SCHEMA = {
    "title": "State",
    "type": "object",
    "properties": {
        "episode_id": {"type": ["string", "null"]},
        "step_count": {"type": "integer", "minimum": 0},
        "session_id": {"type": "string"},
        "env": {"type": "string"},
        "task_id": {"type": "string"},
        "done": {"type": "boolean"},
    },
}


def _error(message: str, code: str, **extra: Any) -> str:
    return json.dumps({"type": "error", "data": {"message": message, "code": code, **extra}})


def add_openenv_routes(app: FastAPI, table: SessionTable, version: str) -> None:
    """Register the OpenEnv routes and ``/sessions/{id}`` on ``app`` (module doc)."""

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "healthy"}

    @app.get("/metadata")
    async def metadata(env: str | None = None) -> dict[str, Any]:
        try:
            served = table.served(env)
        except LookupError as exc:
            http_error(exc)
        return {
            "name": served.name,
            "description": served.env.description or served.env.name,
            "version": version,
            "author": "verigym",
            "documentation_url": None,
            "readme_content": None,
        }

    @app.get("/schema")
    async def schema() -> dict[str, Any]:
        return {"action": _ACTION_SCHEMA, "observation": _OBSERVATION_SCHEMA, "state": _STATE_SCHEMA}

    @app.post("/reset")
    async def reset(request: Request) -> JSONResponse:
        body = await read_json(request, empty={})
        if not isinstance(body, dict):
            raise HTTPException(422, "the reset body must be a JSON object of reset fields")
        try:
            session = await table.open(body)
        except (Full, FieldError, LookupError) as exc:
            http_error(exc)
        return JSONResponse(session.payload(), headers={"X-Session-ID": session.id})

    @app.post("/step")
    async def step(request: Request) -> JSONResponse:
        body = await read_json(request)
        if not isinstance(body, dict) or "action" not in body:
            raise HTTPException(422, "the step body must be {'action': {...}} (the model's assistant turn)")
        sid = session_header(request, body)
        if sid is None:
            raise HTTPException(
                400,
                "no session: send the X-Session-ID header (or 'session_id' in the body) that /reset returned",
            )
        try:
            session = table.get(sid)
            payload = await session.step(body["action"])
        except (KeyError, FieldError, StepError) as exc:
            http_error(exc)
        return JSONResponse(payload, headers={"X-Session-ID": session.id})

    @app.get("/state")
    async def state(request: Request) -> dict[str, Any]:
        sid = session_header(request)
        if sid is None:
            return {"episode_id": None, "step_count": 0}
        try:
            return table.get(sid).state()
        except KeyError as exc:
            http_error(exc)

    @app.post("/mcp")
    async def mcp(request: Request) -> JSONResponse:
        raw = await request.body()
        try:
            parsed = json.loads(raw)
            check_depth(parsed)
        except (ValueError, RecursionError, UnicodeDecodeError):
            return JSONResponse(rpc_error(PARSE_ERROR, "Parse error"))
        return JSONResponse(await handle_rpc(table, parsed))

    @app.get("/sessions/{session_id}")
    async def session_state(session_id: str) -> dict[str, Any]:
        try:
            session = table.get(session_id)
        except KeyError as exc:
            http_error(exc)
        return session.payload()

    @app.delete("/sessions/{session_id}")
    async def session_close(session_id: str) -> dict[str, Any]:
        if not table.close(session_id):
            raise HTTPException(404, f"unknown session {session_id!r} (closed, reaped, or never opened)")
        return {"session_id": session_id, "closed": True}

    @app.post("/sessions/{session_id}/fork")
    async def fork(session_id: str) -> JSONResponse:
        try:
            copy = await table.fork(session_id)
        except (KeyError, StepError, Full) as exc:
            http_error(exc)
        return JSONResponse(copy.payload(), headers={"X-Session-ID": copy.id})

    @app.websocket("/ws")
    async def ws(websocket: WebSocket) -> None:
        await websocket.accept()
        session: Session | None = None
        attach = websocket.query_params.get("session_id")
        if attach is not None:  # openenv's MCPToolClient: the socket joins its HTTP MCP session
            if attach not in table.live:
                with contextlib.suppress(WebSocketDisconnect):  # the client left first: nothing to tell
                    await websocket.send_text(_error(f"Unknown session_id: {attach}", "SESSION_ERROR"))
                await _close(websocket)
                return
            session = table.get(attach)
        try:
            while True:
                raw = await websocket.receive_text()
                reply, session, stop = await _ws_message(table, raw, session, attached=attach is not None)
                if reply is not None:
                    await websocket.send_text(reply)
                if stop:
                    break
        except WebSocketDisconnect:
            return  # the client closed (or vanished): a normal end, nothing to answer or log
        finally:
            if session is not None and attach is None:  # an attached session outlives its socket
                table.close(session.id)
        await _close(websocket)


async def _close(websocket: WebSocket) -> None:
    """Close our side unless the client's close got there first (then closing is no error to log)."""
    with contextlib.suppress(RuntimeError, WebSocketDisconnect):
        await websocket.close()


async def _ws_message(
    table: SessionTable, raw: str, session: Session | None, *, attached: bool = False
) -> tuple[str | None, Session | None, bool]:
    """One WebSocket message → (the reply, None for none; the connection's session now; whether to close
    the socket). ``close`` is not answered, as in openenv."""
    try:
        message = json.loads(raw)
        check_depth(message, "message")
    except (ValueError, RecursionError) as exc:
        return _error(f"Invalid JSON: {exc}", "INVALID_JSON"), session, False
    if not isinstance(message, dict):
        return (
            _error("Invalid message: expected a JSON object with a 'type'", "VALIDATION_ERROR"),
            session,
            False,
        )
    kind = message.get("type", "")
    data = message.get("data", {})
    if kind == "close":
        return None, session, True
    if kind == "state":
        live = session is not None and session.id in table.live
        state = session.state() if live and session is not None else {"episode_id": None, "step_count": 0}
        return json.dumps({"type": "state", "data": state}), session, False
    if kind == "mcp":
        live_session = session if session is not None and session.id in table.live else None
        return (
            json.dumps({"type": "mcp", "data": await handle_rpc(table, data, live_session)}),
            session,
            False,
        )
    if kind not in ("reset", "step"):
        return _error(f"Unknown message type: {kind}", "UNKNOWN_TYPE"), session, False
    if kind == "reset":
        if not isinstance(data, dict):
            return _error("Invalid message: reset data must be an object", "VALIDATION_ERROR"), session, False
        keep_id = session.id if session is not None and attached else None  # a reset keeps an attached id
        if session is not None:
            table.close(session.id)
            session = None
        try:
            session = await table.open(data, session_id=keep_id)
        except Full as exc:
            return _error(str(exc), "CAPACITY_REACHED", max_sessions=table.max_sessions), None, True
        except (FieldError, LookupError) as exc:
            return _error(str(exc), "VALIDATION_ERROR"), None, False
        return json.dumps({"type": "observation", "data": session.payload()}), session, False
    if session is None or session.id not in table.live:
        why = "no episode: send a reset first" if session is None else "the session was closed after idling"
        return _error(why, "EXECUTION_ERROR"), session, False
    try:
        payload = await session.step(data)
    except FieldError as exc:
        return _error(str(exc), "VALIDATION_ERROR"), session, False
    except StepError as exc:
        return _error(str(exc), "EXECUTION_ERROR"), session, False
    return json.dumps({"type": "observation", "data": payload}), session, False
