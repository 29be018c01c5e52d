"""Anthropic's Messages API (``POST /v1/messages``, ``/v1/messages/count_tokens``) on the internal chat
request (``_generation``).

A body becomes a ``ChatRequest``: ``system`` a system message first; a ``user`` message's ``text``
blocks a user message and its ``tool_result`` blocks ``tool`` messages (in block order, the
``tool_use_id`` kept as the ``tool_call_id``); an ``assistant`` message's ``text`` its content and its
``tool_use`` blocks its ``tool_calls`` (``input`` as JSON arguments, ids kept); ``tools`` OpenAI's
function tools (``input_schema`` as ``parameters``); ``tool_choice`` ``auto``/``any``/``tool``/``none``
as ``auto``/``required``/the named function/``none``, ``disable_parallel_tool_use`` as
``parallel_tool_calls: false``; ``output_config.format`` a ``json_schema`` response format. The reply
comes back as a ``message`` (``text`` then ``tool_use`` blocks; ``stop_reason`` ``end_turn``,
``stop_sequence``, ``max_tokens`` or ``tool_use``), or streamed as Anthropic's events
(``message_start``, ``ping``, ``content_block_start``/``_delta`` (``text_delta``,
``input_json_delta``)/``_stop``, ``message_delta``, ``message_stop``). Errors are Anthropic's
``{"type": "error", "error": {...}}``. Extensions (the dialect has none): ``prompt_token_ids`` and
``token_ids`` on the message (streamed: on ``message_delta``), and, asked for with the request
extensions ``logprobs``/``top_logprobs``, ``logprobs`` (chat's ``{"content": [...]}``).

Field by field (anything not listed is a 400 naming it):

- honoured: ``model``, ``max_tokens``, ``messages``, ``system`` (text or text blocks), ``stop_sequences``,
  ``temperature`` (0-1), ``top_p``, ``top_k``, ``tools`` (custom tools: ``name``, ``description``,
  ``input_schema``, ``strict``), ``tool_choice``, ``output_config.format``, ``stream``; a
  ``tool_result``'s ``is_error`` (its content is prefixed ``Error: ``); extensions ``seed``,
  ``logprobs``, ``top_logprobs``;
- accepted, changing nothing: ``metadata``, ``service_tier`` (one tier: ``standard`` is reported),
  ``cache_control`` (top level and on blocks and tools: there is no prompt cache), ``speed:
  "standard"``, ``thinking: {"type": "disabled"}``, ``user_profile_id``, ``workspace_id``, ``citations``
  left unset;
- refused (400): ``thinking`` enabled or adaptive, image/document/thinking/server-tool blocks, server
  tools, ``output_config.effort``, ``container``, ``diagnostics``, ``inference_geo``, ``speed: "fast"``,
  a final assistant message (prefill), tool fields beyond the above.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from verigym.serve._generation import CallPiece, Generation, TextPiece, refuse, sse, to_chat, validate
from verigym.serve._wire import ApiError, ChatRequest

__all__ = [
    "CountBody",
    "MessagesBody",
    "anthropic_error",
    "count_request",
    "message_object",
    "stream_events",
    "to_chat_request",
]

RENAME = {"messages": "messages", "stop": "stop_sequences", "response_format": "output_config.format"}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


class CountBody(BaseModel):
    """A ``POST /v1/messages/count_tokens`` body: the prompt's fields (module doc)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    model: str
    messages: list[dict[str, Any]] = Field(min_length=1)
    system: str | list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: dict[str, Any] | None = None
    thinking: dict[str, Any] | None = None
    output_config: dict[str, Any] | None = None
    cache_control: dict[str, Any] | None = None
    speed: str | None = None
    user_profile_id: str | None = None
    workspace_id: str | None = None


class MessagesBody(CountBody):
    """A ``POST /v1/messages`` body (module doc): unknown fields are refused."""

    max_tokens: int = Field(ge=1)
    stop_sequences: list[str] | None = None
    temperature: float | None = Field(None, ge=0.0, le=1.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=1)
    stream: bool | None = None
    metadata: dict[str, Any] | None = None
    service_tier: str | None = None
    container: Any = None  # refused when set
    diagnostics: Any = None
    inference_geo: Any = None
    seed: int | None = None  # extensions
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=20)


def _check(body: CountBody) -> None:
    if body.thinking is not None and body.thinking != {"type": "disabled"}:
        raise refuse("thinking", "extended thinking is not supported (only {'type': 'disabled'})")
    if body.speed not in (None, "standard"):
        raise refuse("speed", "only 'standard'", "unsupported_value")
    if isinstance(body, MessagesBody):
        for name in ("container", "diagnostics", "inference_geo"):
            if getattr(body, name) is not None:
                raise refuse(name, "is not supported")
        if body.service_tier not in (None, "auto", "standard_only"):
            raise refuse("service_tier", "must be auto or standard_only", "invalid_value")


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        raise refuse(where, "must be text or a list of content blocks", "invalid_value")
    return content


def _only(block: dict[str, Any], where: str, allowed: set[str]) -> None:
    extra = {k for k, v in block.items() if v is not None} - allowed - {"cache_control"}
    if extra:
        raise refuse(f"{where}.{sorted(extra)[0]}", "is not supported")


def _text(content: Any, where: str) -> str:
    """The text of text blocks (``system``, a ``tool_result``'s content)."""
    parts = []
    for j, block in enumerate(_blocks(content, where)):
        if block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise refuse(
                f"{where}[{j}].type", f"{block.get('type')!r} blocks are not supported here (text only)"
            )
        _only(block, f"{where}[{j}]", {"type", "text"})
        parts.append(block["text"])
    return "\n".join(parts)


def _messages(body: CountBody) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if body.system:
        out.append({"role": "system", "content": _text(body.system, "system")})
    for i, message in enumerate(body.messages):
        where, role = f"messages[{i}]", message.get("role")
        _only(message, where, {"role", "content"})
        if role not in ("user", "assistant"):
            raise refuse(f"{where}.role", "must be user or assistant", "invalid_value")
        text: list[str] = []
        calls: list[dict[str, Any]] = []
        for j, block in enumerate(_blocks(message.get("content"), f"{where}.content")):
            at, kind = f"{where}.content[{j}]", block.get("type")
            if kind == "text" and isinstance(block.get("text"), str):
                _only(block, at, {"type", "text"})
                text.append(block["text"])
            elif kind == "tool_use" and role == "assistant":
                _only(block, at, {"type", "id", "name", "input"})
                if not (isinstance(block.get("id"), str) and isinstance(block.get("name"), str)):
                    raise refuse(at, "a tool_use block needs an id and a name", "invalid_value")
                args = json.dumps(block.get("input") or {}, ensure_ascii=False)
                calls.append(
                    {
                        "id": block["id"],
                        "type": "function",
                        "function": {"name": block["name"], "arguments": args},
                    }
                )
            elif kind == "tool_result" and role == "user":
                _only(block, at, {"type", "tool_use_id", "content", "is_error"})
                if not isinstance(block.get("tool_use_id"), str):
                    raise refuse(f"{at}.tool_use_id", "must be the id of a tool_use block", "invalid_value")
                if text:  # text before the results: its own user turn
                    out.append({"role": "user", "content": "".join(text)})
                    text = []
                result = _text(block.get("content", ""), f"{at}.content")
                if block.get("is_error"):
                    result = f"Error: {result}"
                out.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": result})
            else:
                raise refuse(f"{at}.type", f"{kind!r} blocks are not supported in {role} messages")
        if role == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": "".join(text) or (None if calls else "")}
            if calls:
                msg["tool_calls"] = calls
            out.append(msg)
        elif text or not out or out[-1]["role"] != "tool":
            out.append({"role": "user", "content": "".join(text)})
    if body.messages[-1].get("role") == "assistant":
        raise refuse(
            f"messages[{len(body.messages) - 1}]", "a final assistant message (prefill) is not supported"
        )
    return out


def _tools(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    if tools is None:
        return None
    out = []
    for i, tool in enumerate(tools):
        if tool.get("type") not in (None, "custom"):
            raise refuse(
                f"tools[{i}].type", f"{tool.get('type')!r} tools are not supported (custom tools only)"
            )
        _only(tool, f"tools[{i}]", {"type", "name", "description", "input_schema", "strict"})
        if not isinstance(tool.get("name"), str) or not isinstance(tool.get("input_schema"), dict):
            raise refuse(f"tools[{i}]", "a tool needs a name and an input_schema", "invalid_value")
        function = {"name": tool["name"]}
        if tool.get("description") is not None:
            function["description"] = tool["description"]
        function["parameters"] = tool["input_schema"]
        if tool.get("strict") is not None:
            function["strict"] = tool["strict"]
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice: dict[str, Any] | None) -> tuple[str | dict[str, Any] | None, bool | None]:
    """(chat's ``tool_choice``, ``parallel_tool_calls``) of Anthropic's ``tool_choice``."""
    if choice is None:
        return None, None
    kind = choice.get("type")
    allowed = {"type", "disable_parallel_tool_use"} | ({"name"} if kind == "tool" else set())
    _only(choice, "tool_choice", allowed)
    parallel = (
        None if choice.get("disable_parallel_tool_use") is None else not choice["disable_parallel_tool_use"]
    )
    if kind == "tool":
        if not isinstance(choice.get("name"), str):
            raise refuse("tool_choice.name", "must name a tool", "invalid_value")
        return {"type": "function", "function": {"name": choice["name"]}}, parallel
    mapped = {"auto": "auto", "any": "required", "none": "none"}.get(str(kind))
    if mapped is None:
        raise refuse("tool_choice.type", "must be auto, any, tool or none", "invalid_value")
    return mapped, parallel


def _response_format(config: dict[str, Any] | None) -> dict[str, Any] | None:
    if not config:
        return None
    _only(config, "output_config", {"format"})
    fmt = config.get("format")
    if fmt is None:
        return None
    if fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
        raise refuse(
            "output_config.format", "must be {'type': 'json_schema', 'schema': {...}}", "invalid_value"
        )
    _only(fmt, "output_config.format", {"type", "schema"})
    return {"type": "json_schema", "json_schema": {"name": "output", "schema": fmt["schema"], "strict": True}}


def _fields(body: CountBody) -> dict[str, Any]:
    _check(body)
    choice, parallel = _tool_choice(body.tool_choice)
    return {
        "model": body.model,
        "messages": _messages(body),
        "tools": _tools(body.tools),
        "tool_choice": choice,
        "parallel_tool_calls": parallel,
        "response_format": _response_format(body.output_config),
    }


def to_chat_request(raw: dict[str, Any]) -> tuple[MessagesBody, ChatRequest]:
    """A Messages body as the internal request (every field honoured or refused, module doc)."""
    body = validate(MessagesBody, raw)
    fields = _fields(body) | {
        "max_tokens": body.max_tokens,
        "stop": body.stop_sequences,
        "temperature": body.temperature,
        "top_p": body.top_p,
        "top_k": body.top_k,
        "seed": body.seed,
        "logprobs": body.logprobs,
        "top_logprobs": body.top_logprobs if body.logprobs else None,
    }
    return body, to_chat(fields, RENAME)


def count_request(raw: dict[str, Any]) -> ChatRequest:
    """A count_tokens body as the internal request (its prompt is what is counted)."""
    return to_chat(_fields(validate(CountBody, raw)), RENAME)


def _input(arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        value = arguments
    return value if isinstance(value, dict) else {"arguments": value}


def stop_of(body: MessagesBody, gen: Generation, decoded: str) -> tuple[str, str | None]:
    """(``stop_reason``, ``stop_sequence``): the stop sequence that cut the reply is the first of them
    in its decoded tokens."""
    if gen.finish_reason == "length":
        return "max_tokens", None
    if gen.calls:
        return "tool_use", None
    found = [(decoded.find(s), s) for s in body.stop_sequences or [] if s and s in decoded]
    return ("stop_sequence", min(found)[1]) if found else ("end_turn", None)


def _extensions(body: MessagesBody, gen: Generation) -> dict[str, Any]:
    out: dict[str, Any] = {"prompt_token_ids": gen.prompt_token_ids, "token_ids": gen.token_ids}
    if body.logprobs:
        out["logprobs"] = {"content": gen.logprobs or []}
    return out


def _usage(n_in: int, n_out: int) -> dict[str, Any]:
    return {
        "input_tokens": n_in,
        "output_tokens": n_out,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "service_tier": "standard",
    }


def _head(body: MessagesBody) -> dict[str, Any]:
    return {"id": f"msg_{uuid.uuid4().hex}", "type": "message", "role": "assistant", "model": body.model}


def message_object(body: MessagesBody, gen: Generation, decoded: str) -> dict[str, Any]:
    """The non-streamed ``message`` (``decoded``: the reply's tokens as text, for ``stop_sequence``)."""
    content: list[dict[str, Any]] = [{"type": "text", "text": gen.text}] if gen.text else []
    content += [
        {"type": "tool_use", "id": c.id, "name": c.name, "input": _input(c.arguments)} for c in gen.calls
    ]
    reason, sequence = stop_of(body, gen, decoded)
    return {
        **_head(body),
        "content": content,
        "stop_reason": reason,
        "stop_sequence": sequence,
        "usage": _usage(len(gen.prompt_token_ids), gen.completion_tokens),
        **_extensions(body, gen),
    }


async def stream_events(
    body: MessagesBody, n_prompt: int, pieces: AsyncIterator[Any], decode: Callable[[list[int]], str]
) -> AsyncIterator[str]:
    """Anthropic's event stream of a streamed generation (``decode``: token ids to text, for the stop
    sequence); a failure midway ends it with an ``error`` event."""
    head = {**_head(body), "content": [], "stop_reason": None, "stop_sequence": None}
    yield sse({"type": "message_start", "message": {**head, "usage": _usage(n_prompt, 0)}})
    yield sse({"type": "ping"})
    index, open_kind = -1, ""

    def stop() -> list[str]:
        nonlocal open_kind
        was, open_kind = open_kind, ""
        return [sse({"type": "content_block_stop", "index": index})] if was else []

    try:
        async for piece in pieces:
            if isinstance(piece, TextPiece):
                if open_kind != "text":
                    for line in stop():
                        yield line
                    index, open_kind = index + 1, "text"
                    block: dict[str, Any] = {"type": "text", "text": ""}
                    yield sse({"type": "content_block_start", "index": index, "content_block": block})
                delta = {"type": "text_delta", "text": piece.text}
                yield sse({"type": "content_block_delta", "index": index, "delta": delta})
            elif isinstance(piece, CallPiece):
                if piece.id:
                    for line in stop():
                        yield line
                    index, open_kind = index + 1, "tool_use"
                    block = {"type": "tool_use", "id": piece.id, "name": piece.name, "input": {}}
                    yield sse({"type": "content_block_start", "index": index, "content_block": block})
                if piece.arguments:
                    delta = {"type": "input_json_delta", "partial_json": piece.arguments}
                    yield sse({"type": "content_block_delta", "index": index, "delta": delta})
            else:
                gen: Generation = piece
                for line in stop():
                    yield line
                reason, sequence = stop_of(body, gen, decode(gen.token_ids))
                yield sse({
                    "type": "message_delta",
                    "delta": {"stop_reason": reason, "stop_sequence": sequence},
                    "usage": {"input_tokens": n_prompt, "output_tokens": gen.completion_tokens},
                    **_extensions(body, gen),
                })  # fmt: skip
                yield sse({"type": "message_stop"})
    except ApiError as exc:
        yield sse(anthropic_error(exc), "error")


def anthropic_error(exc: ApiError) -> dict[str, Any]:
    """``exc`` as Anthropic's error body."""
    kind = _ERROR_TYPES.get(exc.status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": str(exc)}}
