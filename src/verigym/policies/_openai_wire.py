"""Wire helpers of ``OpenAIPolicy``: the request body, the response parser and error mapping.

Kept apart from the client logic so each can be read and tested alone.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import openai

from verigym.policies.base import PolicyError
from verigym.types import Completion, Message, Sampling, ToolCall, Usage

__all__ = ["classify", "parse_response", "request_body", "retry_after"]


def request_body(
    model: str,
    messages: Sequence[Message],
    tools: Sequence[dict[str, Any]] | None,
    sampling: Sampling,
    n: int,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The keyword arguments of ``chat.completions.create`` and the non-standard ``extra_body``."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [m.to_openai() for m in messages],
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "max_tokens": sampling.max_tokens,
    }
    if n != 1:
        body["n"] = n
    if sampling.stop:
        body["stop"] = list(sampling.stop)
    if sampling.seed is not None:
        body["seed"] = sampling.seed
    if sampling.logprobs or sampling.top_logprobs:
        body["logprobs"] = True
        if sampling.top_logprobs:
            body["top_logprobs"] = sampling.top_logprobs
    if tools:
        body["tools"] = list(tools)
    extra: dict[str, Any] = {}
    if sampling.top_k is not None:
        extra["top_k"] = sampling.top_k
    return body, extra


def _extra(obj: Any, name: str) -> Any:
    """A field the SDK's models do not declare but keep (``extra='allow'``), e.g. vLLM's token ids."""
    value = getattr(obj, name, None)
    if value is None:
        extras = getattr(obj, "model_extra", None) or {}
        value = extras.get(name)
    return value


def _ids(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, list | tuple) and all(isinstance(v, int) for v in value):
        return tuple(value)
    return None


def parse_response(response: Any, *, model: str, n: int) -> list[Completion]:
    """One ``Completion`` per choice. Token ids are kept only where the server returned them.

    Tool-call arguments are kept as the raw text the model wrote, valid JSON or not: a bad call
    is the model's mistake, answered by the harness, not a crash here.
    """
    choices = getattr(response, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise PolicyError("bad_response", "the server returned no choices", retryable=True)
    usage = getattr(response, "usage", None)
    prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
    completion_total = int(getattr(usage, "completion_tokens", 0) or 0)
    response_prompt_ids = _ids(_extra(response, "prompt_token_ids"))
    out: list[Completion] = []
    for choice in sorted(choices, key=lambda c: getattr(c, "index", 0) or 0):
        message = getattr(choice, "message", None)
        if message is None:
            raise PolicyError("bad_response", "a choice has no message", retryable=True)
        calls = tuple(
            ToolCall(
                id=str(getattr(c, "id", None) or f"call_{i}"),
                name=str(getattr(c.function, "name", "") or ""),
                arguments=str(getattr(c.function, "arguments", "") or ""),
            )
            for i, c in enumerate(getattr(message, "tool_calls", None) or [])
            if getattr(c, "function", None) is not None
        )
        logprobs: tuple[float, ...] | None = None
        top: tuple[tuple[float, ...], ...] | None = None
        content = getattr(getattr(choice, "logprobs", None), "content", None)
        if content:
            logprobs = tuple(float(t.logprob) for t in content)
            if any(getattr(t, "top_logprobs", None) for t in content):
                top = tuple(
                    tuple(sorted((float(x.logprob) for x in (t.top_logprobs or [])), reverse=True))
                    for t in content
                )
        completion_ids = _ids(_extra(choice, "token_ids"))
        prompt_ids = _ids(_extra(choice, "prompt_token_ids")) or response_prompt_ids
        if completion_ids is not None:
            completion_tokens = len(completion_ids)
        elif logprobs is not None:
            completion_tokens = len(logprobs)
        else:  # with n > 1 the server reports only a total
            completion_tokens = round(completion_total / n) if n > 1 else completion_total
        out.append(
            Completion(
                text=getattr(message, "content", None) or "",
                tool_calls=calls,
                finish_reason=str(getattr(choice, "finish_reason", None) or "stop"),
                prompt_token_ids=prompt_ids,
                completion_token_ids=completion_ids,
                logprobs=logprobs,
                top_logprobs=top,
                token_ids_exact=completion_ids is not None,
                usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens),
                model=str(getattr(response, "model", None) or model),
            )
        )
    return out


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``Retry-After-Ms`` / ``Retry-After`` (seconds or an HTTP date)."""
    if not headers:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) / scale)
        except ValueError:
            parsed = email.utils.parsedate_to_datetime(value) if name == "retry-after" else None
            if parsed is not None:
                return max(0.0, parsed.timestamp() - time.time())
    return None


def _server_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        msg = inner.get("message") if isinstance(inner, dict) else inner
        if msg:
            return str(msg)[:300]
    return str(exc.message)[:300]


def classify(exc: BaseException, url: str) -> tuple[PolicyError, float | None]:
    """Map a client exception to a ``PolicyError`` and the server's ``Retry-After`` (if any).

    Retryable: 408, 409, 429, 5xx, timeouts, connection failures and unreadable responses.
    Every other 4xx is the request's fault and is not retried.
    """
    if isinstance(exc, PolicyError):
        return exc, None
    if isinstance(exc, openai.APITimeoutError) and "cannot connect" not in str(exc.__cause__).lower():
        return PolicyError("timeout", f"request to {url} timed out", retryable=True), None
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        return PolicyError("connection", f"cannot reach {url}: {cause}", retryable=True), None
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        hint = retry_after(exc.response.headers if exc.response is not None else None)
        detail = f"{url} answered HTTP {status}: {_server_message(exc)}"
        if status == 429:
            return PolicyError("rate_limit", detail, retryable=True), hint
        if status >= 500 or status in (408, 409):
            return PolicyError("server", detail, retryable=True), hint
        if status in (401, 403):
            return PolicyError("auth", detail), None
        return PolicyError("bad_request", detail), None
    if isinstance(exc, openai.APIResponseValidationError | json.JSONDecodeError | UnicodeDecodeError):
        return PolicyError("bad_response", f"{url} sent an unreadable response: {exc}", retryable=True), None
    if isinstance(exc, openai.OpenAIError):
        return PolicyError("client", f"{type(exc).__name__}: {exc}"), None
    return PolicyError("client", f"{type(exc).__name__}: {exc}"), None
