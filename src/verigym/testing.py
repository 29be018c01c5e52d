"""``FakeOpenAIServer``: a real OpenAI-compatible chat-completions server on 127.0.0.1 for tests and
benchmarks, with a scripted "model" and scripted faults.

It is uvicorn serving a small ASGI app in a background thread, so the client under test speaks
real HTTP to a real server (keep-alive, content lengths, dropped connections), with no mocks::

    from verigym.testing import FakeOpenAIServer, arithmetic_answer

    with FakeOpenAIServer(lambda body, attempt: "500" if attempt < 2 else None) as srv:
        ...  # OpenAIPolicy("m", [srv.url]) fails twice per prompt, then gets an answer

- ``answer(body) -> str`` is the model: the reply text for a request body
  (``arithmetic_answer``: "12+34=" → "46"; ``add_two_numbers``: "What is 2 + 3?" → "The answer is 5").
- ``plan(body, attempt) -> fault | None`` picks a fault per request; ``attempt`` counts earlier
  requests with the same messages and seed, so "fail twice, then answer" is one lambda. Faults
  (``FAULTS``): ``500``, ``429`` (with ``Retry-After``), ``400``, ``slow``/``hang`` (answer after
  ``slow_s``), ``trunc`` (a 200 whose JSON body is cut in half), ``cut`` (the whole length is
  announced, half is sent, the connection dropped), ``badjson`` (a 200 that is not JSON),
  ``badargs`` (a tool call with malformed JSON arguments), ``empty`` (no choices).
- ``shape(body, payload) -> payload`` may rewrite each answer (empty content, odd types...).
- ``vllm=True`` returns token ids when asked (``return_token_ids``); ``strict=True`` rejects
  ``return_token_ids`` and ``max_tokens`` as api.openai.com does; ``api_key`` makes a request
  without ``Bearer <api_key>`` a 401.

``requests`` holds the request bodies (``keep_requests=False`` for long runs keeps only the count
``n_requests``); ``faults`` counts the faults injected; ``max_in_flight`` is the most requests
handled at once.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verigym._http_server import ServerHandle

__all__ = [
    "FAULTS",
    "Answer",
    "FakeOpenAIServer",
    "Plan",
    "Shape",
    "add_two_numbers",
    "arithmetic_answer",
    "last_user_text",
]

Answer = Callable[[dict[str, Any]], str]
Plan = Callable[[dict[str, Any], int], "str | None"]
Shape = Callable[[dict[str, Any], dict[str, Any]], dict[str, Any]]
_Send = Callable[[dict[str, Any]], Awaitable[None]]
_Receive = Callable[[], Awaitable[dict[str, Any]]]

FAULTS = ("500", "429", "400", "slow", "hang", "trunc", "cut", "badjson", "badargs", "empty")


def last_user_text(body: dict[str, Any]) -> str:
    """The content of the last user message of a chat request ('' when there is none)."""
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            return str(message.get("content") or "")
    return ""


def arithmetic_answer(body: dict[str, Any]) -> str:
    """The value of an arithmetic prompt such as "12+34=" ("0" for anything else)."""
    expr = last_user_text(body).strip().rstrip("=").strip()
    if not re.fullmatch(r"[\d+\-*() ]+", expr):
        return "0"
    try:
        return str(eval(expr, {"__builtins__": {}}))  # digits, + - * and brackets only
    except (SyntaxError, ZeroDivisionError):
        return "0"


def add_two_numbers(body: dict[str, Any]) -> str:
    """ "The answer is A+B" for "What is A + B?", off by one when the request's seed is divisible
    by 5 (so tests can tell seeded samples apart)."""
    numbers = [int(x) for x in re.findall(r"-?\d+", last_user_text(body))]
    total = sum(numbers[:2]) + (1 if (body.get("seed") or 0) % 5 == 0 else 0)
    return f"The answer is {total}"


class FakeOpenAIServer:
    """Use as ``with FakeOpenAIServer(...) as srv: srv.url`` (``http://127.0.0.1:PORT/v1``)."""

    def __init__(
        self,
        plan: Plan | None = None,
        *,
        answer: Answer = arithmetic_answer,
        shape: Shape | None = None,
        vllm: bool = False,
        strict: bool = False,
        slow_s: float = 1.5,
        retry_after: str = "0.3",
        delay_s: float = 0.0,
        api_key: str | None = None,
        models: Sequence[str] = ("fake-model",),
        keep_requests: bool = True,
        hold_after: int | None = None,
    ) -> None:
        self.plan, self.answer, self.shape = plan, answer, shape
        self.hold_after = hold_after  # requests after the first ``hold_after`` wait for ``release()``
        self._release: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.vllm, self.strict = vllm, strict
        self.slow_s, self.retry_after, self.delay_s = slow_s, retry_after, delay_s
        self.api_key = api_key
        self.models = list(models)
        self.keep_requests = keep_requests
        self.requests: list[dict[str, Any]] = []
        self.n_requests = 0
        self.faults: Counter[str] = Counter()
        self.attempts: Counter[tuple[str, Any]] = Counter()
        self.in_flight = 0
        self.max_in_flight = 0
        self.port = 0
        self._handle: ServerHandle | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAIServer:
        from verigym._http_server import start_in_thread

        # "critical": a dropped connection ("cut") is not worth a traceback
        self._handle = start_in_thread(
            self._app, log_level="critical", name="fake-openai", backlog=1024, graceful_s=1, timeout_s=10
        )
        self.port = self._handle.port
        return self

    def release(self) -> None:
        """Let the requests ``hold_after`` holds (and every later one) through."""
        self.hold_after = None
        if self._loop is not None and self._release is not None:
            self._loop.call_soon_threadsafe(self._release.set)

    def stop(self) -> None:
        self.release()
        if self._handle is not None:
            self._handle.stop(timeout_s=5)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----------------------------------------------------------------- the ASGI app
    async def _app(self, scope: dict[str, Any], receive: _Receive, send: _Send) -> None:
        if scope["type"] != "http":
            return
        headers = dict(scope.get("headers") or [])
        if self.api_key and headers.get(b"authorization") != f"Bearer {self.api_key}".encode():
            await _error(send, 401, "Incorrect API key provided")
            return
        path, method = scope["path"], scope["method"]
        if method == "GET" and path == "/v1/models":
            data = [{"id": m, "object": "model"} for m in self.models]
            await _respond(send, 200, json.dumps({"object": "list", "data": data}).encode())
        elif method == "POST" and path == "/v1/chat/completions":
            raw = await _read(receive)
            try:
                body = json.loads(raw)
                assert isinstance(body, dict) and isinstance(body.get("messages"), list)
            except (ValueError, AssertionError):
                await _error(send, 400, "the request body is not a chat-completions JSON object")
                return
            self.n_requests += 1
            if self.hold_after is not None and self.n_requests > self.hold_after:
                if self._release is None:
                    self._loop, self._release = asyncio.get_running_loop(), asyncio.Event()
                await self._release.wait()
            if self.keep_requests:
                self.requests.append(body)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                await self._chat(body, send)
            finally:
                self.in_flight -= 1
        else:
            await _error(send, 404, f"no route {method} {path}")

    async def _chat(self, body: dict[str, Any], send: _Send) -> None:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        key = (json.dumps(body["messages"]), body.get("seed"))
        attempt = self.attempts[key]
        self.attempts[key] += 1
        if self.strict and "return_token_ids" in body:
            await _error(send, 400, "Unrecognized request argument supplied: return_token_ids")
            return
        if self.strict and "max_tokens" in body:
            await _error(
                send, 400, "Unsupported parameter: 'max_tokens'. Use 'max_completion_tokens' instead."
            )
            return
        fault = self.plan(body, attempt) if self.plan else None
        if fault:
            self.faults[fault] += 1
        if fault in ("500", "429", "400"):
            extra = [(b"retry-after", self.retry_after.encode())] if fault == "429" else []
            await _error(send, int(fault), f"HTTP {fault} (injected)", extra)
            return
        if fault in ("slow", "hang"):
            await asyncio.sleep(self.slow_s)
        payload = self._payload(body, self.answer(body), fault)
        if self.shape is not None:
            payload = self.shape(body, payload)
        raw = json.dumps(payload).encode()
        if fault == "trunc":
            raw = raw[: len(raw) // 2]
        elif fault == "badjson":
            raw = b'{"choices": [ not json'
        elif fault == "cut":  # announce the whole body, send half, return: uvicorn drops the connection
            start = {"type": "http.response.start", "status": 200, "headers": _headers(len(raw))}
            await send(start)
            await send({"type": "http.response.body", "body": raw[: len(raw) // 2], "more_body": True})
            return
        await _respond(send, 200, raw)

    def _payload(self, body: dict[str, Any], text: str, fault: str | None) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": text}
        finish = "stop"
        if fault == "badargs":
            call = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1,'}}
            message, finish = {"role": "assistant", "content": "", "tool_calls": [call]}, "tool_calls"
        n = int(body.get("n") or 1)
        words = text.split()
        ids = self.vllm and bool(body.get("return_token_ids"))
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
            if ids:
                choice["token_ids"] = [100 + j for j in range(len(words))]
            choices.append(choice)
        payload: dict[str, Any] = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model") or self.models[0],
            "choices": [] if fault == "empty" else choices,
            "usage": {
                "prompt_tokens": 7,
                "completion_tokens": len(words) * n,
                "total_tokens": 7 + len(words) * n,
            },
        }
        if ids:
            payload["prompt_token_ids"] = [1, 2, 3, 4, 5, 6, 7]
        return payload


def _headers(length: int, extra: Sequence[tuple[bytes, bytes]] = ()) -> list[tuple[bytes, bytes]]:
    return [(b"content-type", b"application/json"), (b"content-length", str(length).encode()), *extra]


async def _respond(send: _Send, status: int, raw: bytes, extra: Sequence[tuple[bytes, bytes]] = ()) -> None:
    await send({"type": "http.response.start", "status": status, "headers": _headers(len(raw), extra)})
    await send({"type": "http.response.body", "body": raw})


async def _error(send: _Send, status: int, message: str, extra: Sequence[tuple[bytes, bytes]] = ()) -> None:
    error = {"error": {"message": message, "type": "injected", "code": status}}
    await _respond(send, status, json.dumps(error).encode(), extra)


async def _read(receive: _Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)
