"""HTTP transports of ``OpenAIPolicy``: each posts a chat-completions JSON body and returns the JSON answer.

- ``AiohttpTransport`` speaks the OpenAI wire format over one ``aiohttp`` session. It is the
  default: at 64 concurrent requests against an instant server it runs ~5x the requests per
  second of the ``openai`` SDK (whose per-request parameter transformation and ``httpx``-style
  request models cost a few ms of CPU each) — see ``benchmarks/eval_overhead.py``.
- ``SdkTransport`` is the ``openai`` SDK's ``AsyncOpenAI`` (its own retries off), on the SDK's
  default httpx client or its aiohttp client (``openai[aiohttp]``). The raw body is read and
  parsed here, so both transports share one parser.

Both raise what ``classify`` maps to a ``PolicyError``; neither retries (the policy does).
"""

from __future__ import annotations

import json
from typing import Any, Protocol

import aiohttp

from verigym.policies._openai_wire import classify_status

__all__ = ["AiohttpTransport", "SdkTransport", "Transport"]


class Transport(Protocol):
    async def chat(self, body: dict[str, Any]) -> Any: ...

    async def models(self, timeout: float) -> list[str]: ...

    async def aclose(self) -> None: ...


class AiohttpTransport:
    """One keep-alive ``aiohttp`` session to one endpoint."""

    def __init__(self, url: str, api_key: str, timeout: float, connections: int) -> None:
        self.url = url
        self._headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=connections, ttl_dns_cache=300),
            headers=self._headers,
            timeout=self._timeout,
        )

    async def chat(self, body: dict[str, Any]) -> Any:
        data = json.dumps(body).encode()
        async with self._session.post(f"{self.url}/chat/completions", data=data) as resp:
            raw = await resp.read()
            if resp.status >= 400:
                raise classify_status(resp.status, resp.headers, raw, self.url)
        return json.loads(raw)

    async def models(self, timeout: float) -> list[str]:
        async with self._session.get(
            f"{self.url}/models", timeout=aiohttp.ClientTimeout(total=timeout)
        ) as resp:
            raw = await resp.read()
            if resp.status in (401, 403):
                raise classify_status(resp.status, resp.headers, raw, self.url)
            if resp.status >= 400:
                return []
        try:
            return [str(m["id"]) for m in json.loads(raw).get("data", [])]
        except (ValueError, KeyError, TypeError, AttributeError):
            return []

    async def aclose(self) -> None:
        await self._session.close()


class SdkTransport:
    """The ``openai`` SDK's ``AsyncOpenAI`` on its httpx client or its aiohttp client."""

    def __init__(self, url: str, api_key: str, timeout: float, http: str, connections: int = 64) -> None:
        import openai  # slow to import: only when this transport is chosen

        self.url = url
        # One keep-alive connection per request in flight, kept a minute when idle: the SDK's
        # default keeps 100 (20 on aiohttp) alive, so above that concurrency every further request
        # would open a connection and drop it after.
        limits = type(openai.DEFAULT_CONNECTION_LIMITS)(  # the Limits of the httpx the SDK runs on
            max_connections=connections, max_keepalive_connections=connections, keepalive_expiry=60.0
        )
        client: Any = (
            openai.DefaultAioHttpClient(timeout=timeout, limits=limits)
            if http == "aiohttp"
            else openai.DefaultAsyncHttpxClient(timeout=timeout, limits=limits)
        )
        self._client = openai.AsyncOpenAI(
            base_url=url, api_key=api_key, timeout=timeout, max_retries=0, http_client=client
        )

    async def chat(self, body: dict[str, Any]) -> Any:
        raw = await self._client.post("/chat/completions", cast_to=bytes, body=body)
        return json.loads(raw)

    async def models(self, timeout: float) -> list[str]:
        import openai

        try:
            page = await self._client.models.list(timeout=timeout)
        except openai.APIStatusError as exc:
            if exc.status_code in (401, 403):
                raise
            return []
        return [m.id for m in page.data]

    async def aclose(self) -> None:
        await self._client.close()
