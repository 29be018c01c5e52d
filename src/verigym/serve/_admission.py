"""Admission in ``verigym serve``: what a request may cost before any work is done for it.

- ``PromptBound``: a prompt of more characters than the model's context could hold is refused before
  it is tokenized. No token of the vocabulary spans more characters than its longest entry (byte-level
  BPE entries spell one character per byte, SentencePiece ones one per character, byte fallback more),
  so a prompt of ``C`` characters has at least ``C / longest`` tokens; past ``context × longest``
  characters it cannot fit, and tokenizing it would only cost memory and time.
- ``Admission``: the requests being generated and their tokens (prompt + ``max_tokens``, times
  ``n``), counted against ``ServeLimits``; a request that does not fit now gets 429 with
  ``Retry-After``, one that could never fit gets 400. Everything runs on the event loop, so plain
  counters suffice; ``admit`` returns the release, which may be called more than once. A stream gives
  its share back when its response ends, however it ends (``admitted_stream``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from verigym.policies.local import RowSpec
from verigym.serve._guard import ServeLimits
from verigym.serve._wire import ApiError

__all__ = ["Admission", "PromptBound", "admitted_stream", "rows_cost", "text_chars"]


def text_chars(value: Any) -> int:
    """The characters of every string in ``value`` (nested lists and dicts, keys included), walked
    without recursion (the request models already bounded the nesting)."""
    total, todo = 0, [value]
    while todo:
        item = todo.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, dict):
            total += sum(len(k) for k in item if isinstance(k, str))
            todo.extend(item.values())
        elif isinstance(item, list | tuple):
            todo.extend(item)
    return total


def rows_cost(specs: Iterable[RowSpec]) -> int:
    """The tokens rows may hold at once: each row's prompt and its (clamped) ``max_tokens``."""
    return sum(len(s.prompt_ids) + s.max_tokens for s in specs)


class PromptBound:
    """The most characters a prompt may have before it is certain not to fit the context (module doc)."""

    def __init__(self, tokenizer: Any, context_length: int) -> None:
        vocab: Iterable[str] = tokenizer.get_vocab()
        self.longest = max((len(t) for t in vocab), default=1) or 1
        self.context_length = context_length
        self.max_chars = context_length * self.longest

    def check(self, chars: int, param: str) -> None:
        """Raise a 400 ``context_length`` error when ``chars`` characters cannot fit."""
        if chars > self.max_chars:
            raise ApiError(
                400,
                f"the prompt has {chars} characters; the model's context of {self.context_length} tokens "
                f"holds at most {self.max_chars} (no token spans more than {self.longest}); "
                "it was refused without tokenizing it",
                param=param,
                code="context_length",
            )


class Admission:
    """Requests in generation and their tokens, against ``limits`` (module doc)."""

    def __init__(self, limits: ServeLimits) -> None:
        self.limits = limits
        self.requests = 0
        self.tokens = 0

    def admit(self, tokens: int) -> Callable[[], None]:
        """Count a request needing ``tokens``; the returned callable releases it (idempotent)."""
        limits = self.limits
        if tokens > limits.max_queued_tokens:
            raise ApiError(
                400,
                f"this request needs {tokens} tokens (prompt and max_tokens, times n) and the server "
                f"holds at most {limits.max_queued_tokens} at once (--max-queued-tokens); lower n or "
                "max_tokens",
                param="max_tokens",
                code="request_too_large",
            )
        if self.requests >= limits.max_concurrent_requests:
            raise self._busy(f"{self.requests} requests are being generated (--max-concurrent-requests)")
        if self.tokens + tokens > limits.max_queued_tokens:
            raise self._busy(
                f"{self.tokens} tokens are queued and this request needs {tokens} more "
                f"(--max-queued-tokens {limits.max_queued_tokens})"
            )
        self.requests += 1
        self.tokens += tokens
        done = False

        def release() -> None:
            nonlocal done
            if not done:
                done = True
                self.requests -= 1
                self.tokens -= tokens

        return release

    def _busy(self, why: str) -> ApiError:
        after = self.limits.retry_after_s
        return ApiError(
            429,
            f"the server is busy: {why}; retry after {after} s",
            type_="rate_limit_error",
            code="rate_limit_exceeded",
            headers={"Retry-After": str(after)},
        )


class _Admitted(StreamingResponse):
    """An SSE response that releases its admission when it has been sent, broken off or failed."""

    def __init__(self, content: AsyncIterator[str], release: Callable[[], None]) -> None:
        super().__init__(content, media_type="text/event-stream")
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


def admitted_stream(content: AsyncIterator[str], release: Callable[[], None]) -> StreamingResponse:
    """``content`` as server-sent events; ``release`` runs once the response is over."""
    return _Admitted(content, release)
