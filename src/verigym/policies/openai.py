"""``OpenAIPolicy``: any OpenAI-compatible chat-completions server, through the ``openai`` SDK.

- Several base URLs serve one model; each request goes to the least-loaded endpoint, and a
  retry prefers a different one. Each endpoint has its own concurrency bound.
- Retries with exponential backoff and jitter on 408/409/429/5xx, timeouts, connection errors
  and unreadable responses, honouring ``Retry-After``; any other 4xx fails at once. When the
  retries run out a ``PolicyError`` is raised, which harnesses record as an error (never a 0).
- Token ids: vLLM returns them when asked (``return_token_ids``); the completion then has
  ``token_ids_exact=True``. A server that rejects the field is asked again without it, and its
  completions carry no ids (``token_ids_exact=False``) — nothing is re-tokenized. Likewise a
  server that asks for ``max_completion_tokens`` instead of ``max_tokens`` gets it.
- Transports (``transport=``): ``"aiohttp"`` (default) speaks the OpenAI wire format over an
  ``aiohttp`` session; ``"sdk"`` is the ``openai`` SDK's ``AsyncOpenAI`` on its aiohttp client and
  ``"sdk-httpx"`` on its default httpx client. ``benchmarks/eval_overhead.py`` picks the default
  with numbers: against an instant server at concurrency 64 the SDK spends a few ms of CPU per
  request in its own request building, which caps it far below what the connection can carry.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Unpack

from verigym.policies._openai_transport import AiohttpTransport, SdkTransport
from verigym.policies._openai_transport import Transport as _Wire
from verigym.policies._openai_wire import classify, parse_response, request_body
from verigym.policies.base import BatchedPolicy, PolicyArgs, PolicyError
from verigym.types import Completion, Message, Sampling

__all__ = ["OpenAIPolicy", "Transport"]

Transport = Literal["aiohttp", "sdk", "sdk-httpx"]


@dataclass
class _Endpoint:
    url: str
    limit: asyncio.Semaphore
    wire: _Wire | None = None
    load: int = 0
    token_ids: bool = True
    completion_tokens_field: bool = False  # the server wants max_completion_tokens, not max_tokens
    loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)


class OpenAIPolicy(BatchedPolicy):
    """A model behind one or more OpenAI-compatible endpoints.

    ``concurrency`` bounds in-flight requests per endpoint; ``timeout`` is per request (seconds);
    ``max_retries`` counts retries after the first attempt. ``return_token_ids`` asks the server
    for token ids (vLLM); ``extra_body`` adds server-specific fields to every request.
    """

    def __init__(
        self,
        model: str,
        base_urls: Sequence[str],
        api_key: str | None = None,
        *,
        concurrency: int = 64,
        timeout: float = 120.0,
        max_retries: int = 5,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        max_retry_after: float = 120.0,
        transport: Transport = "aiohttp",
        return_token_ids: bool = True,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        if not base_urls:
            raise ValueError("OpenAIPolicy needs at least one base URL")
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        self.model = model
        self.api_key = api_key or "EMPTY"
        self.concurrency = concurrency
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.max_retry_after = max_retry_after
        self.transport: Transport = transport
        self.extra_body = dict(extra_body or {})
        self._endpoints = [
            _Endpoint(url=u.rstrip("/"), limit=asyncio.Semaphore(concurrency), token_ids=return_token_ids)
            for u in base_urls
        ]
        self._turn = itertools.count()
        self.retries = 0  # retries made so far (for reports and tests)

    @property
    def name(self) -> str:
        return self.model

    @property
    def base_urls(self) -> list[str]:
        return [e.url for e in self._endpoints]

    def _wire(self, endpoint: _Endpoint) -> _Wire:
        loop = asyncio.get_running_loop()
        if endpoint.wire is None or endpoint.loop is not loop:
            # an HTTP session is bound to the event loop it was made in; a new loop needs a new one
            if self.transport == "aiohttp":
                wire: _Wire = AiohttpTransport(endpoint.url, self.api_key, self.timeout, self.concurrency)
            else:
                http = "aiohttp" if self.transport == "sdk" else "httpx"
                wire = SdkTransport(endpoint.url, self.api_key, self.timeout, http, self.concurrency)
            endpoint.wire = wire
            endpoint.limit = asyncio.Semaphore(self.concurrency)
            endpoint.loop = loop
        return endpoint.wire

    def _pick(self, avoid: _Endpoint | None) -> _Endpoint:
        if len(self._endpoints) == 1:
            return self._endpoints[0]
        pool = [e for e in self._endpoints if e is not avoid] or self._endpoints
        low = min(e.load for e in pool)
        least = [e for e in pool if e.load == low]
        return least[next(self._turn) % len(least)]

    def _backoff(self, attempt: int, hint: float | None) -> float:
        delay = min(self.backoff_max, self.backoff_base * 2.0**attempt)
        delay = delay * (0.5 + random.random() / 2.0)  # "equal jitter"
        if hint is not None:
            delay = max(delay, min(hint, self.max_retry_after))
        return delay

    async def _send(self, endpoint: _Endpoint, body: dict[str, Any]) -> Any:
        if endpoint.token_ids:
            body = {**body, "return_token_ids": True}
        if endpoint.completion_tokens_field and "max_tokens" in body:
            body = {**body, "max_completion_tokens": body["max_tokens"]}
            del body["max_tokens"]
        wire = self._wire(endpoint)
        endpoint.load += 1
        try:
            async with endpoint.limit:
                return await wire.chat(body)
        finally:
            endpoint.load -= 1

    async def _request(
        self,
        messages: Sequence[Message],
        tools: Sequence[dict[str, Any]] | None,
        sampling: Sampling,
        n: int,
    ) -> list[Completion]:
        body, extra = request_body(self.model, messages, tools, sampling, n)
        body.update(self.extra_body)
        body.update(extra)
        endpoint: _Endpoint | None = None
        attempt = 0
        while True:
            endpoint = self._pick(endpoint if attempt else None)
            try:
                response = await self._send(endpoint, body)
                return parse_response(response, model=self.model, n=n)
            except Exception as exc:
                error, hint = classify(exc, endpoint.url)
            if error.kind == "bad_request" and endpoint.token_ids and "return_token_ids" in str(error):
                endpoint.token_ids = False  # this server does not offer token ids: ask without
                continue
            if (
                error.kind == "bad_request"
                and not endpoint.completion_tokens_field
                and "max_completion_tokens" in str(error)
            ):
                endpoint.completion_tokens_field = True  # newer OpenAI models reject max_tokens
                continue
            if not error.retryable or attempt >= self.max_retries:
                if attempt:
                    raise PolicyError(
                        error.kind, f"{error} (after {attempt + 1} attempts)", retryable=error.retryable
                    )
                raise error
            await asyncio.sleep(self._backoff(attempt, hint))
            attempt += 1
            self.retries += 1

    async def complete_n(self, messages: Sequence[Message], **kw: Unpack[PolicyArgs]) -> list[Completion]:
        """``sampling.n`` completions in one request (the server's ``n``)."""
        sampling = kw["sampling"]
        return await self._request(messages, kw.get("tools"), sampling, sampling.n)

    async def check(self, timeout: float = 5.0) -> list[str]:
        """Fail fast when an endpoint cannot be reached or rejects the API key.

        Returns the model ids the endpoints list. Raises ``PolicyError`` (kind ``connection``,
        ``timeout`` or ``auth``). A server without ``/models`` passes: only reachability and the
        key are checked.
        """
        models: list[str] = []
        for endpoint in self._endpoints:
            try:
                found = await self._wire(endpoint).models(timeout)
            except Exception as exc:
                raise classify(exc, endpoint.url)[0] from None
            models.extend(m for m in found if m not in models)
        return models

    async def aclose(self) -> None:
        """Close the HTTP sessions (safe to call more than once)."""
        for endpoint in self._endpoints:
            if endpoint.wire is not None and endpoint.loop is asyncio.get_running_loop():
                await endpoint.wire.aclose()
            endpoint.wire = None
            endpoint.loop = None
