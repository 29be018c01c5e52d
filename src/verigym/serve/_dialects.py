"""The dialect layer of ``verigym serve``: the Responses API and Anthropic Messages beside Chat Completions.

Each dialect translates its request into the internal request, the Chat Completions ``ChatRequest``
(``_generation``), runs it through ``Handler.chat`` (the path of ``/v1/chat/completions``: admission,
tool-call parsing, structured outputs, cancellation when the client hangs up) and translates the
reply back, so that serve, eval and an agent gateway share one translation:

- ``POST /v1/responses`` (``_responses``, replies in ``_responses_reply``): OpenAI's Responses API, streamed or not; stateless (nothing
  is stored, ``previous_response_id`` is refused);
- ``POST /v1/messages`` and ``POST /v1/messages/count_tokens`` (``_messages``): Anthropic's Messages
  API, streamed or not, with Anthropic's error bodies.

Every field a dialect accepts is honoured or refused with a 400 naming it (the field-by-field list is
in each module's docstring); token ids (and logprobs when asked for) come back in every dialect, as
extension fields where the dialect has none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from verigym.serve import _messages, _responses, _responses_reply
from verigym.serve._generation import (
    disconnect,
    event_stream,
    generate,
    generate_stream,
    prompt_ids,
    read_json,
    renamed,
)
from verigym.serve._handler import Handler
from verigym.serve._wire import ApiError

__all__ = ["add_dialect_routes"]


def add_dialect_routes(app: FastAPI, handler: Handler) -> None:
    """Register ``/v1/responses``, ``/v1/messages`` and ``/v1/messages/count_tokens`` on ``app``."""

    @app.post("/v1/responses", response_model=None)
    async def responses(request: Request) -> dict[str, Any] | StreamingResponse:
        body, req = _responses.to_chat_request(await read_json(request))
        try:
            if body.stream:
                _, pieces = await generate_stream(handler, req)
                return event_stream(_responses_reply.stream_events(body, pieces))
            gen = await generate(handler, req, disconnect(request))
        except ApiError as exc:
            raise _responses.chat_error(exc) from None
        return _responses_reply.response_object(body, gen)

    @app.post("/v1/messages", response_model=None)
    async def messages(request: Request) -> Any:
        try:
            body, req = _messages.to_chat_request(await read_json(request))
            if body.stream:
                ids, pieces = await generate_stream(handler, req)
                return event_stream(_messages.stream_events(body, len(ids), pieces, _decoder(handler)))
            gen = await generate(handler, req, disconnect(request))
            return _messages.message_object(body, gen, _decoder(handler)(gen.token_ids))
        except ApiError as exc:
            return _anthropic(renamed(exc, _messages.RENAME))

    @app.post("/v1/messages/count_tokens", response_model=None)
    async def count_tokens(request: Request) -> Any:
        try:
            req = _messages.count_request(await read_json(request))
            handler.adapter_for(req.model)
            return {"input_tokens": len(prompt_ids(handler, req))}
        except ApiError as exc:
            return _anthropic(renamed(exc, _messages.RENAME))


def _decoder(handler: Handler) -> Callable[[list[int]], str]:
    def decode(ids: list[int]) -> str:
        return str(handler.policy.tokenizer.decode(ids, skip_special_tokens=True))

    return decode


def _anthropic(exc: ApiError) -> JSONResponse:
    return JSONResponse(_messages.anthropic_error(exc), exc.status, headers=exc.headers)
