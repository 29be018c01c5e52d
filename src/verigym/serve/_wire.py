"""The OpenAI wire format of ``verigym serve``: request bodies, errors, logprobs and choices.

Field names follow OpenAI's API; token ids follow vLLM's ``return_token_ids`` (``prompt_token_ids`` on
the response, ``token_ids`` on each choice) and are always returned. ``top_k`` is accepted as in vLLM.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from verigym.policies.base import PolicyError

__all__ = [
    "ApiError",
    "ChatRequest",
    "CompletionRequest",
    "LoadLoraRequest",
    "UnloadLoraRequest",
    "chat_logprobs",
    "error_body",
    "legacy_logprobs",
    "status_of",
]


class ApiError(Exception):
    """An error answered as OpenAI's ``{"error": {...}}`` with an HTTP status."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type_: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.type, self.param, self.code = status, type_, param, code
        self.headers = headers  # sent with the response (``Retry-After`` on a 429)


def error_body(message: str, type_: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def status_of(exc: PolicyError) -> ApiError:
    """The HTTP error for a ``PolicyError`` raised while serving."""
    if exc.kind in ("adapter_not_found", "model_not_found"):
        return ApiError(404, str(exc), code="model_not_found")
    if exc.kind in ("bad_request", "context_length", "bad_adapter"):
        head = str(exc).split(":", 1)[0]  # "response_format.json_schema: ..." names its field
        param = head if exc.kind == "bad_request" and _FIELD.fullmatch(head) else None
        return ApiError(400, str(exc), param=param, code=exc.kind)
    return ApiError(500, str(exc), type_="server_error", code=exc.kind)


_FIELD = re.compile(r"[a-z_]+(\.[a-z_]+)*")

MAX_DEPTH = 64  # the deepest nesting of lists and objects a request field may have


def _text_ok(value: Any, where: str) -> None:
    """Every string inside ``value`` must be encodable text: a lone surrogate (JSON ``"\\ud800"``) is
    not, and would fail later inside the tokenizer. Nesting deeper than ``MAX_DEPTH`` is refused too
    (the chat template and ``json.dumps`` recurse). Walked without recursion, so no depth crashes it;
    a place is spelled out (``messages[0].content``) only for the error."""
    todo: list[tuple[Any, _Path, int]] = [(value, (None, where), 0)]
    while todo:
        item, path, depth = todo.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                bad = item[exc.start]
                raise ValueError(
                    f"{_spell(path)} contains a lone surrogate (\\u{ord(bad):04x} at index {exc.start}); "
                    "send valid Unicode text"
                ) from None
        elif isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                raise ValueError(f"{_spell(path)} is nested more than {MAX_DEPTH} levels deep")
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for k, v in pairs:
                if isinstance(k, str):
                    todo.append((k, path, depth + 1))
                if isinstance(v, str | dict | list):
                    todo.append((v, (path, f".{k}" if isinstance(item, dict) else f"[{k}]"), depth + 1))


_Path = tuple[Any, str]  # (parent path or None, this step): built per item, spelled only for errors


def _spell(path: _Path) -> str:
    steps: list[str] = []
    node: _Path | None = path
    while node is not None:
        steps.append(node[1])
        node = node[0]
    steps.reverse()
    return "".join(steps) if len(steps) <= 8 else "".join(steps[:4]) + "..." + "".join(steps[-2:])


class _Common(BaseModel):
    # strict: "stream": "yes" or "max_tokens": "8" are errors, not silently converted
    model_config = ConfigDict(extra="allow", strict=True)

    model: str
    n: int = Field(1, ge=1, le=128)
    temperature: float | None = Field(None, ge=0.0, le=2.0)
    top_p: float | None = Field(None, gt=0.0, le=1.0)
    top_k: int | None = Field(None, ge=-1)
    max_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None
    seed: int | None = None
    stream: bool = False
    stream_options: dict[str, Any] | None = None

    def stops(self) -> tuple[str, ...]:
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(s for s in self.stop if s)


class ChatRequest(_Common):
    messages: list[dict[str, Any]] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=20)
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None
    parallel_tool_calls: bool | None = None
    response_format: dict[str, Any] | None = None

    @field_validator("messages")
    @classmethod
    def _roles(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for i, m in enumerate(value):
            if m.get("role") not in ("system", "developer", "user", "assistant", "tool"):
                raise ValueError(f"messages[{i}].role must be system, user, assistant or tool")
            content = m.get("content")
            if not (content is None or isinstance(content, str) or _parts(content)):
                raise ValueError(f"messages[{i}].content must be text or a list of content parts")
            _text_ok(m, f"messages[{i}]")
        return [{**m, "role": "system"} if m["role"] == "developer" else m for m in value]

    @field_validator("tools", "stop", "tool_choice", "stream_options", "response_format")
    @classmethod
    def _text(cls, value: Any, info: ValidationInfo) -> Any:
        _text_ok(value, str(info.field_name))
        return value


class CompletionRequest(_Common):
    prompt: str | list[str] | list[int] | list[list[int]]
    logprobs: int | None = Field(None, ge=0, le=20)
    echo: bool = False  # the prompt (and, with logprobs, its tokens' logprobs) leads each choice
    max_tokens: int | None = Field(None, ge=0)  # 0: score the prompt only (with echo, as vLLM)

    @model_validator(mode="after")
    def _zero_needs_echo(self) -> CompletionRequest:
        if self.max_tokens == 0 and not self.echo:
            raise ValueError("max_tokens = 0 needs echo = true (score the prompt without generating)")
        return self

    @field_validator("prompt", "stop")
    @classmethod
    def _text(cls, value: Any, info: ValidationInfo) -> Any:
        if not (isinstance(value, list) and value and not isinstance(value[0], str)):  # ids: typed already
            _text_ok(value, str(info.field_name))
        return value


def _parts(content: Any) -> bool:
    return isinstance(content, list) and all(isinstance(p, dict) for p in content)


class LoadLoraRequest(BaseModel):
    model_config = ConfigDict(strict=True)

    lora_name: str = Field(min_length=1)
    lora_path: str = Field(min_length=1)


class UnloadLoraRequest(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)

    lora_name: str = Field(min_length=1)


def _entry(text: str, logprob: float) -> dict[str, Any]:
    return {"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8"))}


def chat_logprobs(
    pieces: list[str], logprobs: list[float], top: list[list[tuple[str, float]]] | None
) -> dict[str, Any]:
    """The ``choices[i].logprobs`` object of a chat completion."""
    content = []
    for i, (piece, lp) in enumerate(zip(pieces, logprobs, strict=True)):
        entry = _entry(piece, lp)
        entry["top_logprobs"] = [_entry(t, v) for t, v in top[i]] if top else []
        content.append(entry)
    return {"content": content, "refusal": None}


def legacy_logprobs(
    pieces: list[str],
    logprobs: Sequence[float | None],
    top: Sequence[list[tuple[str, float]] | None] | None,
) -> dict[str, Any]:
    """The ``choices[i].logprobs`` object of a (legacy) text completion (with ``echo``, the first
    prompt token's logprob and top logprobs are null, as OpenAI and vLLM send)."""
    offsets, at = [], 0
    for piece in pieces:
        offsets.append(at)
        at += len(piece)
    return {
        "tokens": pieces,
        "token_logprobs": list(logprobs),
        "top_logprobs": [None if t is None else dict(t) for t in top] if top else None,
        "text_offset": offsets,
    }
