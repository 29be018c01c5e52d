"""Wire helpers of ``OpenAIPolicy``: the request body, the response parser and error mapping.

Kept apart from the client logic so each can be read and tested alone.
"""

from __future__ import annotations

import email.utils
import json
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp

from verigym.policies.base import PolicyError
from verigym.types import Completion, Message, Sampling, ToolCall, Usage

__all__ = ["StatusError", "classify", "classify_status", "parse_response", "request_body", "retry_after"]


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
        if sampling.tool_choice is not None:
            body["tool_choice"] = sampling.tool_choice
        if not sampling.parallel_tool_calls:
            body["parallel_tool_calls"] = False
    if sampling.response_format is not None:
        body["response_format"] = sampling.response_format
    extra: dict[str, Any] = {}
    if sampling.top_k is not None:
        extra["top_k"] = sampling.top_k
    return body, extra


def _ids(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return tuple(value)
    return None


def _calls(message: dict[str, Any]) -> tuple[ToolCall, ...]:
    out = []
    for i, call in enumerate(message.get("tool_calls") or ()):
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            args = fn.get("arguments")
            out.append(
                ToolCall(
                    id=str(call.get("id") or f"call_{i}"),
                    name=str(fn.get("name") or ""),
                    arguments=args if isinstance(args, str) else json.dumps(args if args is not None else {}),
                )
            )
    return tuple(out)


def parse_response(data: Any, *, model: str, n: int) -> list[Completion]:
    """One ``Completion`` per choice of a chat-completions JSON body.

    Token ids are kept only where the server returned them (vLLM: ``token_ids`` on the choice,
    ``prompt_token_ids`` on the choice or the response). Tool-call arguments are kept as the raw
    text the model wrote, valid JSON or not: a bad call is the model's mistake, answered by the
    harness, not a crash here.
    """
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices:
        raise PolicyError("bad_response", "the server returned no choices", retryable=True)
    bad: list[str] = []
    usage = data.get("usage") or {}
    prompt_tokens, completion_total = _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")
    if prompt_tokens is None or completion_total is None:
        bad.append("usage")
        prompt_tokens = completion_total = 0
    response_prompt_ids = _ids(data.get("prompt_token_ids"))
    name = str(data.get("model") or model)
    out: list[Completion] = []
    if not all(isinstance(c, dict) for c in choices):
        raise PolicyError("bad_response", "response field 'choices' holds a non-object", retryable=True)
    ordered = choices if len(choices) == 1 else sorted(choices, key=lambda c: _index(c.get("index")))
    for pos, choice in enumerate(ordered):
        where = f"choices[{pos}]"
        message = choice.get("message")
        if not isinstance(message, dict):
            raise PolicyError("bad_response", f"response field '{where}.message' is missing", retryable=True)
        text = message.get("content")
        if text is not None and not isinstance(text, str):
            raise PolicyError(
                "bad_response",
                f"response field '{where}.message.content' is {type(text).__name__}, not text",
                retryable=True,
            )
        calls = message.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            raise PolicyError(
                "bad_response", f"response field '{where}.message.tool_calls' is not a list", retryable=True
            )
        parsed = _logprobs(choice.get("logprobs"))
        if parsed is None:
            bad.append(f"{where}.logprobs")
            parsed = (None, None)
        logprobs, top = parsed
        completion_ids = _ids(choice.get("token_ids"))
        prompt_ids = _ids(choice.get("prompt_token_ids")) or response_prompt_ids
        if completion_ids is not None:
            completion_tokens = len(completion_ids)
        elif logprobs is not None:
            completion_tokens = len(logprobs)
        else:  # with n > 1 the server reports only a total
            completion_tokens = round(completion_total / n) if n > 1 else completion_total
        out.append(
            Completion(
                text=text or "",
                tool_calls=_calls(message) if calls else (),
                finish_reason=str(choice.get("finish_reason") or "stop"),
                prompt_token_ids=prompt_ids,
                completion_token_ids=completion_ids,
                logprobs=logprobs,
                top_logprobs=top,
                token_ids_exact=completion_ids is not None,
                usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens),
                model=name,
                malformed=tuple(b for b in bad if not b.startswith("choices[") or b.startswith(where))
                if bad
                else (),
            )
        )
    return out


def _index(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _count(usage: Any, field: str) -> int | None:
    """A token count of ``usage`` (0 when absent); None when ``usage`` or the count is malformed."""
    if not isinstance(usage, dict):
        return None
    value = usage.get(field)
    if value is None:
        return 0
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


Logprobs = tuple[tuple[float, ...] | None, tuple[tuple[float, ...], ...] | None]


def _logprobs(value: Any) -> Logprobs | None:
    """(logprobs, top logprobs) of a choice's ``logprobs`` object, (None, None) when absent; None when
    it is malformed (a string, entries without a numeric ``logprob``...)."""
    if value is None:
        return None, None
    if not isinstance(value, dict):
        return None
    content = value.get("content")
    if not content:
        return (None, None) if content is None or content == [] else None
    try:
        logprobs = tuple(float(t["logprob"]) for t in content)
        top = None
        if any(t.get("top_logprobs") for t in content):
            top = tuple(
                tuple(sorted((float(x["logprob"]) for x in t.get("top_logprobs") or ()), reverse=True))
                for t in content
            )
    except (TypeError, KeyError, ValueError, AttributeError):
        return None
    return logprobs, top


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


def _server_message(body: Any, fallback: str) -> str:
    if isinstance(body, dict):
        inner = body.get("error", body)
        msg = inner.get("message") if isinstance(inner, dict) else inner
        if msg:
            return str(msg)[:300]
    return fallback[:300]


class StatusError(PolicyError):
    """A ``PolicyError`` from an HTTP status; ``retry_after`` is the server's hint in seconds."""

    def __init__(self, kind: str, message: str, *, retryable: bool, retry_after: float | None) -> None:
        super().__init__(kind, message, retryable=retryable)
        self.retry_after = retry_after


def classify_status(status: int, headers: Mapping[str, str] | None, body: Any, url: str) -> StatusError:
    """The error of an HTTP error status. Retryable: 408, 409, 429 and 5xx; other 4xx are not."""
    if isinstance(body, bytes | str):
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        try:
            body = json.loads(text)
        except ValueError:
            body = text
    detail = f"{url} answered HTTP {status}: {_server_message(body, str(body))}"
    if status == 429:
        kind = "rate_limit"
    elif status >= 500 or status in (408, 409):
        kind = "server"
    elif status in (401, 403):
        kind = "auth"
    else:
        kind = "bad_request"
    retryable = kind in ("rate_limit", "server")
    hint = retry_after(headers) if retryable else None
    return StatusError(kind, detail, retryable=retryable, retry_after=hint)


def classify(exc: BaseException, url: str) -> tuple[PolicyError, float | None]:
    """Map a client exception (openai SDK, aiohttp, JSON) to a ``PolicyError`` and a Retry-After.

    Retryable: timeouts, connection failures, unreadable responses and the statuses of
    ``classify_status``.
    """
    if isinstance(exc, StatusError):
        return exc, exc.retry_after
    if isinstance(exc, PolicyError):
        return exc, None
    openai: Any = sys.modules.get("openai")  # only the SDK transport imports it (slow to import)
    if openai is None:
        return _classify_plain(exc, url)
    if isinstance(exc, openai.APIStatusError):
        headers = exc.response.headers if exc.response is not None else None
        error = classify_status(exc.status_code, headers, exc.body, url)
        return error, error.retry_after
    if isinstance(exc, aiohttp.ClientConnectorError) or (
        isinstance(exc, openai.APIConnectionError) and "cannot connect" in str(exc.__cause__).lower()
    ):
        return PolicyError("connection", f"cannot reach {url}: {exc.__cause__ or exc}", retryable=True), None
    if isinstance(exc, openai.APITimeoutError | TimeoutError):
        return PolicyError("timeout", f"request to {url} timed out", retryable=True), None
    if isinstance(exc, openai.APIConnectionError | aiohttp.ClientError):
        return PolicyError(
            "connection", f"connection to {url} failed: {exc.__cause__ or exc}", retryable=True
        ), None
    if isinstance(exc, openai.APIResponseValidationError | ValueError):  # includes JSONDecodeError
        return PolicyError("bad_response", f"{url} sent an unreadable response: {exc}", retryable=True), None
    return PolicyError("client", f"{type(exc).__name__}: {exc}"), None


def _classify_plain(exc: BaseException, url: str) -> tuple[PolicyError, float | None]:
    if isinstance(exc, aiohttp.ClientConnectorError):
        return PolicyError("connection", f"cannot reach {url}: {exc}", retryable=True), None
    if isinstance(exc, TimeoutError):
        return PolicyError("timeout", f"request to {url} timed out", retryable=True), None
    if isinstance(exc, aiohttp.ClientError):
        return PolicyError("connection", f"connection to {url} failed: {exc}", retryable=True), None
    if isinstance(exc, ValueError):
        return PolicyError("bad_response", f"{url} sent an unreadable response: {exc}", retryable=True), None
    return PolicyError("client", f"{type(exc).__name__}: {exc}"), None
