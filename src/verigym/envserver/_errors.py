"""How the env-server's HTTP routes read a body and answer a failure: one line in FastAPI's ``{"detail"}``.

``read_json`` parses a body with its own error lines (not JSON, nested too deep: 422; a client that left
mid-body, cut by the body deadline or gone, is answered 400 into the void rather than logged as a
traceback); ``http_error``
maps the package's exceptions to statuses: a bad field 422, an unknown session or environment 404, a step
that cannot be taken now 409, a full server 429 with ``Retry-After``.
"""

from __future__ import annotations

import json
from typing import Any, NoReturn

from fastapi import HTTPException, Request
from starlette.requests import ClientDisconnect

from verigym.envserver._catalog import FieldError
from verigym.envserver._episode import StepError
from verigym.envserver._sessions import Full
from verigym.envserver._wire import check_depth

__all__ = ["RETRY_AFTER_S", "http_error", "read_json", "session_header"]

RETRY_AFTER_S = 1


async def read_json(request: Request, *, empty: Any = None) -> Any:
    """The body as JSON (``empty`` for an empty body); 422 with one line when it is not."""
    try:
        raw = await request.body()
    except ClientDisconnect:  # nobody reads the answer; it only keeps this normal end out of the log
        raise HTTPException(400, "the client left before its request body was complete") from None
    if not raw.strip():
        if empty is None:
            raise HTTPException(422, "the request body is empty; expected a JSON object")
        return empty
    try:
        value = json.loads(raw)
    except RecursionError:
        raise HTTPException(422, "the request body is nested too deeply to parse") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise HTTPException(422, f"the request body is not valid JSON: {exc}") from None
    try:
        check_depth(value)
    except FieldError as exc:
        raise HTTPException(422, str(exc)) from None
    return value


def http_error(exc: BaseException) -> NoReturn:
    """Raise ``exc`` as the ``HTTPException`` it maps to (module doc); anything else is re-raised."""
    if isinstance(exc, Full):
        raise HTTPException(429, str(exc), headers={"Retry-After": str(RETRY_AFTER_S)}) from None
    if isinstance(exc, KeyError):
        raise HTTPException(404, str(exc.args[0]) if exc.args else "not found") from None
    if isinstance(exc, LookupError):
        raise HTTPException(404, str(exc)) from None
    if isinstance(exc, FieldError):
        raise HTTPException(422, str(exc)) from None
    if isinstance(exc, StepError):
        raise HTTPException(exc.status, str(exc)) from None
    raise exc


def session_header(request: Request, body: Any = None) -> str | None:
    """The session a request names: its ``X-Session-ID`` header, else a ``session_id`` body field."""
    found = request.headers.get("x-session-id")
    if found:
        return found.strip()
    if isinstance(body, dict) and isinstance(body.get("session_id"), str):
        return str(body["session_id"])
    return None
