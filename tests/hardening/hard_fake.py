"""A small OpenAI-compatible chat server on 127.0.0.1 for the hardening tests: it answers arithmetic
prompts ("12+34=") exactly, and ``shape(body, payload)`` may rewrite each response (empty content, a
string where an object belongs...)."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable
from typing import Any

from aiohttp import web

Shape = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]


def answer(body: dict[str, Any]) -> str:
    user = next((m["content"] for m in reversed(body["messages"]) if m["role"] == "user"), "")
    expr = user.strip().rstrip("=")
    return str(eval(expr, {"__builtins__": {}})) if re.fullmatch(r"[\d+\-* ()]+", expr) else "0"


class Fake:
    """``with Fake(shape) as f: f.url``; ``f.requests`` holds the request bodies."""

    def __init__(self, shape: Shape | None = None) -> None:
        self.shape = shape
        self.requests: list[dict[str, Any]] = []
        self.port = 0
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> Fake:
        self._thread.start()
        assert self._ready.wait(10)
        return self

    def __exit__(self, *_: object) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _serve(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
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

    async def _models(self, _: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "fake", "object": "model"}]})

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        payload: dict[str, Any] = {
            "id": "x",
            "object": "chat.completion",
            "model": "fake",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer(body)},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
        }
        if self.shape is not None:
            payload = self.shape(body, payload)
        return web.Response(body=json.dumps(payload).encode(), content_type="application/json")
