"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests, with scripted faults.

The "model" is deterministic: it answers "What is A + B?" with A+B, except when the request's
seed is divisible by 5, when it answers A+B+1. ``plan(body, attempt)`` may return a fault for
a request instead: "500", "429", "400", "slow", "trunc", "badargs", "empty" (or None: answer).
``attempt`` counts requests with the same prompt and seed, so "fail twice, then answer" is
``lambda body, attempt: "500" if attempt < 2 else None``.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

from aiohttp import web

Plan = Callable[[dict[str, Any], int], "str | None"]


def model_answer(body: dict[str, Any]) -> str:
    text = next((m["content"] for m in reversed(body["messages"]) if m["role"] == "user"), "")
    nums = [int(x) for x in re.findall(r"-?\d+", text)]
    total = sum(nums[:2])
    if (body.get("seed") or 0) % 5 == 0:
        total += 1
    return f"The answer is {total}"


class FakeServer:
    """Use as ``with FakeServer(plan) as srv: srv.url``."""

    def __init__(
        self,
        plan: Plan | None = None,
        *,
        vllm: bool = False,
        strict: bool = False,
        slow_s: float = 1.5,
        retry_after: str = "0.3",
        delay_s: float = 0.0,
        api_key: str | None = None,
    ) -> None:
        self.plan = plan
        self.api_key = api_key  # when set, requests without "Bearer <api_key>" get 401
        self.vllm = vllm  # answer return_token_ids like vLLM
        self.strict = strict  # reject unknown fields like api.openai.com
        self.slow_s = slow_s
        self.retry_after = retry_after
        self.delay_s = delay_s
        self.attempts: Counter[tuple[str, Any]] = Counter()
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.port = 0
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> FakeServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fake server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        runner = web.AppRunner(app, access_log=None)
        loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._ready.set()
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    def _denied(self, request: web.Request) -> web.Response | None:
        if self.api_key and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return _error(401, "Incorrect API key provided")
        return None

    async def _models(self, request: web.Request) -> web.Response:
        if denied := self._denied(request):
            return denied
        return web.json_response({"object": "list", "data": [{"id": "fake-model", "object": "model"}]})

    async def _chat(self, request: web.Request) -> web.Response:
        if denied := self._denied(request):
            return denied
        body = await request.json()
        self.requests.append(body)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await self._answer(body)
        finally:
            self.in_flight -= 1

    async def _answer(self, body: dict[str, Any]) -> web.Response:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        key = (json.dumps(body["messages"]), body.get("seed"))
        attempt = self.attempts[key]
        self.attempts[key] += 1
        if self.strict and "return_token_ids" in body:
            return _error(400, "Unrecognized request argument supplied: return_token_ids")
        if self.strict and "max_tokens" in body:
            return _error(400, "Unsupported parameter: 'max_tokens'. Use 'max_completion_tokens' instead.")
        fault = self.plan(body, attempt) if self.plan else None
        if fault == "500":
            return _error(500, "internal error (injected)")
        if fault == "429":
            return _error(429, "rate limited (injected)", {"Retry-After": self.retry_after})
        if fault == "400":
            return _error(400, "bad request (injected)")
        if fault == "slow":
            await asyncio.sleep(self.slow_s)
        text = model_answer(body)
        message: dict[str, Any] = {"role": "assistant", "content": text}
        finish = "stop"
        if fault == "badargs":
            message = {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1,'}}
                ],
            }
            finish = "tool_calls"
        n = int(body.get("n") or 1)
        words = text.split()
        choices = []
        for i in range(n):
            choice: dict[str, Any] = {"index": i, "message": message, "finish_reason": finish}
            if body.get("logprobs"):
                k = int(body.get("top_logprobs") or 0)
                choice["logprobs"] = {
                    "content": [
                        {
                            "token": w,
                            "logprob": -0.1 * (j + 1),
                            "bytes": None,
                            "top_logprobs": [
                                {"token": w, "logprob": -0.1 * (j + 1) - 0.5 * t, "bytes": None}
                                for t in range(k)
                            ],
                        }
                        for j, w in enumerate(words)
                    ]
                }
            if self.vllm and body.get("return_token_ids"):
                choice["token_ids"] = [100 + j for j in range(len(words))]
            choices.append(choice)
        payload: dict[str, Any] = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"] or "fake-model",
            "choices": choices,
            "usage": {
                "prompt_tokens": 7,
                "completion_tokens": len(words) * n,
                "total_tokens": 7 + len(words) * n,
            },
        }
        if self.vllm and body.get("return_token_ids"):
            payload["prompt_token_ids"] = [1, 2, 3, 4, 5, 6, 7]
        raw = json.dumps(payload).encode()
        if fault == "trunc":
            raw = raw[: len(raw) // 2]
        if fault == "empty":
            raw = json.dumps({**payload, "choices": []}).encode()
        return web.Response(body=raw, content_type="application/json")


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": "injected", "code": status}}, status=status, headers=headers
    )
