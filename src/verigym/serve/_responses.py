"""OpenAI's Responses API (``POST /v1/responses``) on the internal chat request (``_generation``).

A body becomes a ``ChatRequest``: ``instructions`` a system message first; ``input`` text a user
message, or its items messages (``user``/``system``/``developer``/``assistant``, text parts),
``function_call`` items the assistant's ``tool_calls`` (joined to the assistant message before them)
and ``function_call_output`` items ``tool`` messages, call ids kept; function ``tools`` OpenAI's chat
tools; ``tool_choice`` as chat spells it; ``text.format`` a ``response_format``. The reply comes back
(``_responses_reply``) as a ``response`` object (a ``message`` item with the text, then a ``function_call`` item per call),
or streamed as OpenAI's events (``response.created`` ... ``response.completed``, with
``sequence_number``). Extensions on the response object (never on its items, which clients send back
as input): ``prompt_token_ids`` and ``token_ids`` (the whole reply, tool-call tokens included), and
with logprobs asked for, ``logprobs`` (chat's ``{"content": [...]}`` over ``token_ids``).

Field by field (anything not listed is a 400 naming it):

- honoured: ``model``, ``input``, ``instructions``, ``max_output_tokens``, ``temperature``, ``top_p``,
  ``tools`` (``function`` tools: ``name``, ``description``, ``parameters``, ``strict``),
  ``tool_choice`` (``auto``/``none``/``required``/``{"type": "function", "name"}``),
  ``parallel_tool_calls``, ``text.format`` (``text``/``json_schema``/``json_object``), ``stream``,
  ``top_logprobs`` and ``include: ["message.output_text.logprobs"]`` (the logprobs of every token of
  the reply, on ``output_text.logprobs`` too), ``truncation: "disabled"`` (the default: too long an
  input is a 400); extensions ``seed``, ``top_k`` and ``stop`` as in chat;
- accepted, changing nothing: ``store`` (true or false: **nothing is stored**, so a response cannot be
  retrieved later), ``metadata``, ``user``, ``safety_identifier``, ``prompt_cache_key`` (echoed back),
  ``prompt_cache_retention``, ``service_tier`` (one tier: ``"default"`` is reported),
  ``include: ["reasoning.encrypted_content"]`` (no reasoning items are made), ``background: false``,
  ``reasoning`` without an effort other than ``"none"``, ``stream_options.include_obfuscation: false``;
- refused (400): ``previous_response_id`` and ``conversation`` (nothing is stored), ``item_reference``
  and ``reasoning`` input items, image/file/audio parts, tools other than ``function`` (and
  ``defer_loading``, ``allowed_callers`` other than direct, ``output_schema``), ``allowed_tools`` and
  other tool choices, ``text.verbosity``, other ``include`` values, ``truncation: "auto"``,
  ``background: true``, a reasoning effort, ``max_tool_calls``, ``prompt``, ``prompt_cache_options``,
  ``context_management``, ``moderation``, ``image``, ``access_programs``, ``background_options``,
  ``stream_options.include_obfuscation: true``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from verigym.serve._generation import refuse, renamed, to_chat, validate
from verigym.serve._wire import ApiError, ChatRequest

__all__ = ["ResponsesBody", "chat_error", "to_chat_request"]

RENAME = {
    "messages": "input",
    "max_tokens": "max_output_tokens",
    "response_format": "text.format",
    "tool_choice": "tool_choice",
}
LOGPROBS = "message.output_text.logprobs"
_HARMLESS_INCLUDES = {LOGPROBS, "reasoning.encrypted_content"}
_REFUSED = {  # fields refused whenever they are set (not null)
    "previous_response_id": "needs a stored response; verigym serve stores nothing (send the whole input)",
    "conversation": "needs stored conversations; verigym serve stores nothing (send the whole input)",
    "max_tool_calls": "is not supported (it limits built-in tools, which verigym serve has none of)",
    "prompt": "stored prompt templates are not supported",
    "prompt_cache_options": "is not supported (there is no prompt cache to steer)",
    "context_management": "is not supported (no server-side compaction)",
    "moderation": "is not supported",
    "image": "is not supported (text-only models)",
    "access_programs": "is not supported",
    "background_options": "is not supported (no background mode)",
}


class ResponsesBody(BaseModel):
    """A ``POST /v1/responses`` body (module doc): unknown fields are refused."""

    model_config = ConfigDict(extra="forbid", strict=True)

    model: str
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    max_output_tokens: int | None = Field(None, ge=1)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_logprobs: int | None = Field(None, ge=0, le=20)
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    text: dict[str, Any] | None = None
    include: list[str] | None = None
    stream: bool | None = None
    stream_options: dict[str, Any] | None = None
    store: bool | None = None
    metadata: dict[str, str] | None = None
    user: str | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    prompt_cache_retention: str | None = None
    service_tier: str | None = None
    truncation: str | None = None
    reasoning: dict[str, Any] | None = None
    background: bool | None = None
    seed: int | None = None  # extensions, as in chat
    top_k: int | None = None
    stop: str | list[str] | None = None
    previous_response_id: Any = None  # refused when set (``_REFUSED``)
    conversation: Any = None
    max_tool_calls: Any = None
    prompt: Any = None
    prompt_cache_options: Any = None
    context_management: Any = None
    moderation: Any = None
    image: Any = None
    access_programs: Any = None
    background_options: Any = None

    def logprobs(self) -> bool:
        return LOGPROBS in (self.include or []) or bool(self.top_logprobs)


def _check(body: ResponsesBody) -> None:
    for name, why in _REFUSED.items():
        if getattr(body, name) is not None:
            raise refuse(name, why)
    for i, value in enumerate(body.include or []):
        if value not in _HARMLESS_INCLUDES:
            raise refuse(
                f"include[{i}]", f"{value!r} cannot be served (only {LOGPROBS!r})", "unsupported_value"
            )
    if body.truncation not in (None, "disabled"):
        raise refuse("truncation", "only 'disabled' (a too long input is a 400)", "unsupported_value")
    if body.background:
        raise refuse("background", "background mode is not supported", "unsupported_value")
    if body.reasoning and (
        set(body.reasoning) - {"effort", "summary", "generate_summary"}
        or body.reasoning.get("effort") not in (None, "none")
        or body.reasoning.get("summary") or body.reasoning.get("generate_summary")
    ):  # fmt: skip
        raise refuse(
            "reasoning", "reasoning is not supported (only an effort of 'none')", "unsupported_value"
        )
    if (body.stream_options or {}).get("include_obfuscation"):
        raise refuse(
            "stream_options.include_obfuscation", "obfuscation is not supported", "unsupported_value"
        )
    if set(body.stream_options or {}) - {"include_obfuscation"}:
        raise refuse("stream_options", f"unknown options {sorted(body.stream_options or {})}")


def _text_of(content: Any, where: str) -> str:
    """The text of a message's content: a string, or ``input_text``/``output_text`` parts."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise refuse(where, "must be text or a list of content parts", "invalid_value")
    out = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in ("input_text", "output_text", "text") or not isinstance(part.get("text"), str):
            raise refuse(f"{where}[{j}]", f"{kind!r} parts are not supported (text only)")
        extra = set(part) - {"type", "text", "annotations", "logprobs"}
        if extra:
            raise refuse(f"{where}[{j}].{sorted(extra)[0]}", "unknown field")
        out.append(part["text"])
    return "".join(out)


def _messages(body: ResponsesBody) -> list[dict[str, Any]]:
    """``instructions`` and ``input`` as chat messages (module doc)."""
    out: list[dict[str, Any]] = []
    if body.instructions:
        out.append({"role": "system", "content": body.instructions})
    items = [{"role": "user", "content": body.input}] if isinstance(body.input, str) else body.input
    for i, item in enumerate(items):
        where, kind = f"input[{i}]", item.get("type", "message")
        allowed = {
            "message": {"type", "role", "content", "id", "status", "phase"},
            "function_call": {"type", "call_id", "name", "arguments", "id", "status"},
            "function_call_output": {"type", "call_id", "output", "id", "status", "name"},
        }.get(kind)
        if allowed is None:
            why = (
                "needs stored items; verigym serve stores nothing"
                if kind == "item_reference"
                else "not supported"
            )
            raise refuse(f"{where}.type", f"{kind!r} items are {why}")
        extra = {k for k, v in item.items() if v is not None} - allowed
        if extra:
            raise refuse(f"{where}.{sorted(extra)[0]}", "unknown field")
        if kind == "message":
            role = item.get("role")
            if role not in ("user", "system", "developer", "assistant"):
                raise refuse(f"{where}.role", "must be user, system, developer or assistant", "invalid_value")
            out.append({"role": role, "content": _text_of(item.get("content"), f"{where}.content")})
        elif kind == "function_call":
            for key in ("call_id", "name", "arguments"):
                if not isinstance(item.get(key), str):
                    raise refuse(f"{where}.{key}", "must be a string", "invalid_value")
            call = {
                "id": item["call_id"],
                "type": "function",
                "function": {"name": item["name"], "arguments": item["arguments"]},
            }
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant":  # the same model turn
                last["tool_calls"] = [*(last.get("tool_calls") or []), call]
            else:
                out.append({"role": "assistant", "content": None, "tool_calls": [call]})
        else:
            if not isinstance(item.get("call_id"), str):
                raise refuse(f"{where}.call_id", "must be the call_id of a function_call", "invalid_value")
            text = _text_of(item.get("output"), f"{where}.output")
            out.append({"role": "tool", "tool_call_id": item["call_id"], "content": text})
    return out


def _tools(body: ResponsesBody) -> list[dict[str, Any]] | None:
    if body.tools is None:
        return None
    out = []
    for i, tool in enumerate(body.tools):
        if tool.get("type") != "function":
            raise refuse(f"tools[{i}].type", f"{tool.get('type')!r} tools are not supported (function only)")
        if not isinstance(tool.get("name"), str):
            raise refuse(f"tools[{i}].name", "must be a string", "invalid_value")
        harmless = {
            "defer_loading": (None, False),
            "allowed_callers": (None, ["direct"]),
            "output_schema": (None,),
        }
        for key, value in tool.items():
            if key in harmless and value not in harmless[key]:
                raise refuse(f"tools[{i}].{key}", "is not supported", "unsupported_value")
            if key not in harmless and key not in ("type", "name", "description", "parameters", "strict"):
                raise refuse(f"tools[{i}].{key}", "unknown field")
        function = {"name": tool["name"]}
        for key in ("description", "parameters", "strict"):
            if tool.get(key) is not None:
                function[key] = tool[key]
        out.append({"type": "function", "function": function})
    return out


def _tool_choice(choice: str | dict[str, Any] | None) -> str | dict[str, Any] | None:
    if choice is None or choice in ("auto", "none", "required"):
        return choice
    if isinstance(choice, dict) and choice.get("type") == "function" and set(choice) == {"type", "name"}:
        return {"type": "function", "function": {"name": choice["name"]}}
    kind = choice.get("type") if isinstance(choice, dict) else choice
    raise refuse("tool_choice", f"{kind!r} is not supported (auto, none, required or a function)")


def _response_format(text: dict[str, Any] | None) -> dict[str, Any] | None:
    if not text:
        return None
    for key, value in text.items():
        if key == "verbosity" and value is not None:
            raise refuse("text.verbosity", "is not supported", "unsupported_value")
        if key not in ("format", "verbosity"):
            raise refuse(f"text.{key}", "unknown field")
    fmt = text.get("format")
    if fmt is None or fmt == {"type": "text"}:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") not in ("json_schema", "json_object"):
        raise refuse("text.format.type", "must be text, json_schema or json_object", "invalid_value")
    if fmt["type"] == "json_object":
        return {"type": "json_object"}
    extra = set(fmt) - {"type", "name", "schema", "strict", "description"}
    if extra:
        raise refuse(f"text.format.{sorted(extra)[0]}", "unknown field")
    spec = {k: fmt[k] for k in ("name", "schema", "strict", "description") if fmt.get(k) is not None}
    return {"type": "json_schema", "json_schema": spec}


def to_chat_request(raw: dict[str, Any]) -> tuple[ResponsesBody, ChatRequest]:
    """A Responses body as the internal request (every field honoured or refused, module doc)."""
    body = validate(ResponsesBody, raw)
    _check(body)
    fields = {
        "model": body.model,
        "messages": _messages(body),
        "max_tokens": body.max_output_tokens,
        "temperature": body.temperature,
        "top_p": body.top_p,
        "top_k": body.top_k,
        "seed": body.seed,
        "stop": body.stop,
        "tools": _tools(body),
        "tool_choice": _tool_choice(body.tool_choice),
        "parallel_tool_calls": body.parallel_tool_calls,
        "response_format": _response_format(body.text),
        "logprobs": body.logprobs() or None,
        "top_logprobs": body.top_logprobs if body.logprobs() else None,
    }
    return body, to_chat(fields, RENAME)


def chat_error(exc: ApiError) -> ApiError:
    """An error of the internal request, with its field spelled as the Responses API spells it."""
    return renamed(exc, RENAME)
