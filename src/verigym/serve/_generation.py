"""The internal request and result every dialect of ``verigym serve`` shares (``_dialects``).

The internal request is the Chat Completions request (``ChatRequest``): the Responses API
(``_responses``) and Anthropic Messages (``_messages``) translate their bodies into one and back, so
that admission, tool-call parsing, structured outputs and token ids behave the same in all three. A
request runs through ``Handler.chat``, the very path of ``/v1/chat/completions``:

- ``generate``: a non-streamed request; the chat completion comes back as a ``Generation`` (text, tool
  calls, finish reason, prompt and completion token ids, logprobs);
- ``generate_stream``: a streamed one; the handler's ``chat.completion.chunk`` stream is read as it is
  sent (``Handler.chat`` answers ``stream=true`` with an SSE response, which is run here as an ASGI app
  into a queue, so its admission is released however the stream ends) and comes out as ``TextPiece``
  and ``CallPiece`` items as the chunks arrive, then the ``Generation``. Stopping early (the client hung
  up) cancels the rows.

Also here: reading a body (``read_json``), validating a dialect's body model (``validate``) and its
refusals (``refuse``), both as 400s naming the field, and the SSE framing (``sse``, ``event_stream``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from fastapi import Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ValidationError
from starlette.types import Message

from verigym.policies.base import PolicyError
from verigym.serve._admission import text_chars
from verigym.serve._handler import Handler
from verigym.serve._rows import Gone
from verigym.serve._wire import ApiError, ChatRequest, status_of

__all__ = [
    "Call",
    "CallPiece",
    "Generation",
    "TextPiece",
    "disconnect",
    "event_stream",
    "generate",
    "generate_stream",
    "prompt_ids",
    "read_json",
    "refuse",
    "sse",
    "to_chat",
    "validate",
]

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Call:
    """A tool call of the reply: its id (kept through every dialect), name and JSON arguments text."""

    id: str
    name: str
    arguments: str


@dataclass
class Generation:
    """The internal result: one reply of the model, whatever the dialect."""

    text: str
    calls: list[Call]
    finish_reason: str  # "stop" | "length" | "tool_calls", as chat completions spell it
    token_ids: list[int]
    prompt_token_ids: list[int]
    logprobs: list[dict[str, Any]] | None = None  # chat's ``logprobs.content`` entries, one per token
    completion_tokens: int = field(default=0)

    def __post_init__(self) -> None:
        self.completion_tokens = self.completion_tokens or len(self.token_ids)


@dataclass(frozen=True)
class TextPiece:
    """New reply text, as it is streamed."""

    text: str


@dataclass(frozen=True)
class CallPiece:
    """A piece of tool call ``index``: its id and name when it opens, then arguments text."""

    index: int
    id: str
    name: str
    arguments: str


Piece = TextPiece | CallPiece | Generation


def refuse(param: str, why: str, code: str = "unsupported_parameter") -> ApiError:
    """The 400 for a field that is not served: it names ``param`` and says why."""
    return ApiError(400, f"{param}: {why}", param=param, code=code)


_UNPARSED = {
    UnicodeDecodeError: "the request body is not valid UTF-8",
    RecursionError: "the request body is nested too deeply to parse",
}


async def read_json(request: Request) -> dict[str, Any]:
    """The request's JSON object body, or a 400 saying what is wrong with it."""
    raw = await request.body()
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, RecursionError) as exc:
        raise ApiError(400, _UNPARSED[type(exc)]) from None
    except json.JSONDecodeError:
        raise ApiError(400, "the request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return body


def _where(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}" if out else str(part)
    return out or "body"


def _first_error(exc: ValidationError, rename: Mapping[str, str] | None = None) -> ApiError:
    first = exc.errors()[0]
    loc = tuple(first.get("loc", ()))
    if rename and loc and isinstance(loc[0], str):
        loc = (rename.get(loc[0], loc[0]), *loc[1:])
    where = _where(loc)
    if first.get("type") == "extra_forbidden":
        return refuse(where, "unknown field (verigym serve refuses a field it does not serve)")
    msg = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
    return ApiError(400, f"{where}: {msg}", param=where)


def validate(model: type[M], body: dict[str, Any]) -> M:
    """``body`` as ``model`` (unknown fields refused), or a 400 naming the first bad field."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        raise _first_error(exc) from None


def to_chat(fields: dict[str, Any], rename: Mapping[str, str]) -> ChatRequest:
    """The internal request; an error names the dialect's field (``rename``: chat name -> dialect's)."""
    try:
        return ChatRequest.model_validate({k: v for k, v in fields.items() if v is not None})
    except ValidationError as exc:
        raise _first_error(exc, rename) from None


def renamed(exc: ApiError, rename: Mapping[str, str]) -> ApiError:
    """``exc`` with its ``param`` spelled as the dialect spells it."""
    if exc.param:
        head, dot, rest = exc.param.partition(".")
        exc.param = rename.get(head, head) + dot + rest
    return exc


def disconnect(request: Request) -> Gone:
    """``gone`` for ``Handler.chat``: returns once the client closed the connection."""

    async def gone() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    return gone


def prompt_ids(handler: Handler, req: ChatRequest) -> list[int]:
    """The prompt's token ids, as ``Handler.chat`` encodes them (too long a prompt is a 400 first)."""
    handler.bound.check(text_chars(req.messages) + text_chars(req.tools), "messages")
    try:
        return handler.encode(req)
    except PolicyError as exc:
        raise status_of(exc) from None


def _calls(raw: list[dict[str, Any]] | None) -> list[Call]:
    return [
        Call(str(t["id"]), str(t["function"]["name"]), str(t["function"]["arguments"])) for t in raw or []
    ]


async def generate(handler: Handler, req: ChatRequest, gone: Gone | None) -> Generation:
    """Run ``req`` (not streamed) and return its reply."""
    out = await handler.chat(req.model_copy(update={"stream": False}), gone)
    if not isinstance(out, dict):  # pragma: no cover - stream=False answers a dict
        raise ApiError(500, "the chat handler streamed a non-streamed request", type_="server_error")
    choice = out["choices"][0]
    message = choice["message"]
    logprobs = choice.get("logprobs")
    return Generation(
        text=message.get("content") or "",
        calls=_calls(message.get("tool_calls")),
        finish_reason=str(choice.get("finish_reason") or "stop"),
        token_ids=list(choice.get("token_ids") or []),
        prompt_token_ids=list(out.get("prompt_token_ids") or []),
        logprobs=None if logprobs is None else list(logprobs.get("content") or []),
        completion_tokens=int(out.get("usage", {}).get("completion_tokens", 0)),
    )


async def generate_stream(handler: Handler, req: ChatRequest) -> tuple[list[int], AsyncIterator[Piece]]:
    """Start ``req`` streamed: its prompt ids, and its pieces as they come (module doc). Errors before
    the first token (a bad request, a full server) are raised here; later ones from the iterator."""
    ids = prompt_ids(handler, req)
    streamed = req.model_copy(update={"stream": True, "stream_options": {"include_usage": True}})
    response = await handler.chat(streamed)
    if not isinstance(response, StreamingResponse):  # pragma: no cover
        raise ApiError(500, "the chat handler did not stream", type_="server_error")
    return ids, _pieces(_chunks(response), ids)


async def _pieces(chunks: AsyncIterator[dict[str, Any]], ids: list[int]) -> AsyncIterator[Piece]:
    """Chat chunks as pieces; tool-call deltas are gathered by index, as OpenAI's clients do."""
    text, finish, tokens = "", "stop", 0
    token_ids: list[int] = []
    logprobs: list[dict[str, Any]] | None = None
    calls: dict[int, list[str]] = {}
    async for chunk in chunks:
        if "error" in chunk:
            err = chunk["error"] or {}
            status = 400 if err.get("type") == "invalid_request_error" else 500
            raise ApiError(status, str(err.get("message")), type_=str(err.get("type")), code=err.get("code"))
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                text += delta["content"]
                yield TextPiece(delta["content"])
            for t in delta.get("tool_calls") or []:
                fn, index = t.get("function") or {}, int(t.get("index", 0))
                call = calls.setdefault(index, ["", "", ""])
                opens = not call[0]
                call[0] = call[0] or str(t.get("id") or "")
                call[1] = call[1] or str(fn.get("name") or "")
                piece = str(fn.get("arguments") or "")
                call[2] += piece
                yield CallPiece(index, call[0] if opens else "", call[1] if opens else "", piece)
            token_ids += choice.get("token_ids") or []
            if choice.get("logprobs"):
                logprobs = (logprobs or []) + list(choice["logprobs"].get("content") or [])
            finish = choice.get("finish_reason") or finish
        if chunk.get("usage"):
            tokens = int(chunk["usage"].get("completion_tokens", 0))
    yield Generation(
        text=text,
        calls=[Call(*calls[i]) for i in sorted(calls)],
        finish_reason=finish,
        token_ids=token_ids,
        prompt_token_ids=ids,
        logprobs=logprobs,
        completion_tokens=tokens,
    )


async def _chunks(response: StreamingResponse) -> AsyncIterator[dict[str, Any]]:
    """The ``data:`` objects of an SSE response, read by running it as an ASGI app (so its own clean-up,
    the admission's release, runs however it ends); closing this iterator cancels the response."""
    queue: asyncio.Queue[bytes | None] = asyncio.Queue()

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body" and message.get("body"):
            queue.put_nowait(bytes(message["body"]))

    async def receive() -> Message:  # never called under ASGI 2.4; a disconnect never comes from here
        await asyncio.Event().wait()
        return {"type": "http.disconnect"}  # pragma: no cover

    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}}
    task = asyncio.ensure_future(response(scope, receive, send))
    task.add_done_callback(lambda _: queue.put_nowait(None))
    buffer = b""
    try:
        while (body := await queue.get()) is not None:
            buffer += body
            while b"\n\n" in buffer:
                event, buffer = buffer.split(b"\n\n", 1)
                for line in event.decode("utf-8").splitlines():
                    if line.startswith("data: ") and line != "data: [DONE]":
                        yield json.loads(line[6:])
        if not task.cancelled() and task.exception() is not None:
            raise ApiError(500, f"internal error: {task.exception()}", type_="server_error")
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def sse(data: dict[str, Any], event: str | None = None) -> str:
    """One server-sent event: ``event: NAME`` (default: ``data["type"]``) and its JSON ``data``."""
    return f"event: {event or data['type']}\ndata: {json.dumps(data)}\n\n"


def event_stream(content: AsyncIterator[str]) -> StreamingResponse:
    return StreamingResponse(content, media_type="text/event-stream")
