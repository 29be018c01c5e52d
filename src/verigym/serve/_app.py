"""``verigym serve``: an OpenAI-compatible HTTP server (FastAPI + uvicorn) for a ``LocalPolicy``.

Endpoints: ``GET /health``, ``GET /v1/models``, ``POST /v1/chat/completions`` (``stream=true`` as SSE),
``POST /v1/completions``, OpenAI's Responses API ``POST /v1/responses`` and Anthropic's Messages API
``POST /v1/messages`` and ``/v1/messages/count_tokens`` (``_dialects``: translated into the chat request
and back, streamed as each dialect streams), and vLLM's ``POST /v1/load_lora_adapter`` / ``/v1/unload_lora_adapter``
(``{"lora_name", "lora_path"}``; a loaded adapter is addressed by using its name as ``model``; loading
an existing name replaces its weights, so a trainer can push new ones), and SGLang's
``POST /update_weights_from_disk`` (``{"model_path", "version"}``: reload full weights). Every response carries the
exact token ids (``prompt_token_ids``, and ``token_ids`` per choice, as vLLM's ``return_token_ids``).

Requests are batched continuously: one that arrives while a generation pass runs joins it at the next
decode step when the cache has room, else the next pass (``LocalPolicy.submit``). Bad requests get OpenAI-style ``{"error": ...}`` 4xx bodies.

Safe to expose (``create_app``'s keywords, ``verigym serve``'s flags): ``api_key`` makes every endpoint
but ``/health`` need ``Authorization: Bearer KEY`` and ``limits`` bound bodies, concurrency and queued
tokens (``_guard``, ``_admission``); the weight endpoints (``_weights``) are off unless ``adapter_dir``
names the one directory they may read from.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.exceptions import HTTPException

from verigym._http_server import ServerHandle, ServerLimits, serve_forever, start_in_thread
from verigym.policies.local import LocalPolicy
from verigym.serve._dialects import add_dialect_routes
from verigym.serve._guard import ApiKey, Guard, ServeLimits
from verigym.serve._handler import Handler
from verigym.serve._weights import AdapterDir, add_weight_routes
from verigym.serve._wire import ApiError, ChatRequest, CompletionRequest, error_body

__all__ = ["RunningServer", "add_error_handlers", "create_app", "serve", "spawn_server"]

_KEY_VAR = "VERIGYM_SERVE_API_KEY"  # how ``spawn_server`` hands its server the key


def create_app(
    policy: LocalPolicy,
    *,
    name: str | None = None,
    default_max_tokens: int = 512,
    api_key: str | None = None,
    limits: ServeLimits | None = None,
    adapter_dir: str | Path | None = None,
) -> FastAPI:
    """The FastAPI app serving ``policy`` under the model name ``name`` (default: the policy's name).

    ``api_key``: the bearer key every endpoint but ``/health`` requires (None: no key). ``limits``: body
    size, concurrent requests and queued tokens (``ServeLimits()`` by default). ``adapter_dir``: the
    directory the weight endpoints may load from (None: they answer 403).
    """
    limits = limits or ServeLimits()
    handler = Handler(policy, name or policy.name, default_max_tokens, limits)
    app = FastAPI(title="verigym serve", docs_url=None, redoc_url=None)
    app.state.handler = handler
    app.add_middleware(
        Guard, api_key=None if api_key is None else ApiKey(api_key), max_body_bytes=limits.max_body_bytes
    )

    add_error_handlers(app)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        def card(model_id: str, parent: str | None) -> dict[str, Any]:
            return {
                "id": model_id,
                "object": "model",
                "created": handler.created,
                "owned_by": "verigym",
                "root": model_id,
                "parent": parent,
            }

        data = [card(handler.name, None)] + [card(a, handler.name) for a in policy.adapters]
        return {"object": "list", "data": data}

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(req: ChatRequest, request: Request) -> dict[str, Any] | StreamingResponse:
        return await handler.chat(req, lambda: _disconnect(request))

    @app.post("/v1/completions", response_model=None)
    async def completions(req: CompletionRequest, request: Request) -> dict[str, Any] | StreamingResponse:
        return await handler.complete(req, lambda: _disconnect(request))

    add_dialect_routes(app, handler)
    add_weight_routes(app, policy, handler.name, AdapterDir(adapter_dir))
    return app


_UNPARSED = {
    UnicodeDecodeError: "the request body is not valid UTF-8",
    RecursionError: "the request body is nested too deeply to parse",
}


def add_error_handlers(app: FastAPI) -> None:
    """OpenAI-style ``{"error": ...}`` bodies for ``ApiError``s, invalid bodies (400 naming the field),
    unparsable bodies and crashes (500), on ``app`` (serve's and the gateway's)."""

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        body = error_body(str(exc), exc.type, exc.param, exc.code)
        return JSONResponse(body, status_code=exc.status, headers=exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {}
        loc = [str(p) for p in first.get("loc", ()) if p != "body"]
        if first.get("type") == "json_invalid":
            return JSONResponse(
                error_body("the request body is not valid JSON", "invalid_request_error"), 400
            )
        msg = str(first.get("msg", "invalid request")).removeprefix("Value error, ")
        message = f"{'.'.join(loc) or 'body'}: {msg}"
        return JSONResponse(error_body(message, "invalid_request_error", ".".join(loc) or None), 400)

    @app.exception_handler(HTTPException)
    async def _http(_: Request, exc: HTTPException) -> JSONResponse:
        message = _UNPARSED.get(type(exc.__cause__), str(exc.detail))  # FastAPI's "error parsing the body"
        return JSONResponse(error_body(message, "invalid_request_error"), exc.status_code)

    @app.exception_handler(Exception)
    async def _crash(_: Request, exc: Exception) -> JSONResponse:
        return JSONResponse(error_body(f"internal error: {exc}", "server_error"), 500)


async def _disconnect(request: Request) -> None:
    """Returns once the client closed the connection (its body was read already: the next ASGI
    message is ``http.disconnect``)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def serve(
    policy: LocalPolicy,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    name: str | None = None,
    log_level: str = "warning",
    api_key: str | None = None,
    limits: ServeLimits | None = None,
    adapter_dir: str | Path | None = None,
    server_limits: ServerLimits | None = None,
) -> None:
    """Serve ``policy`` until interrupted (blocking); the keywords are ``create_app``'s, and
    ``server_limits`` the connection's deadlines and cap (``verigym._http_server``)."""
    app = create_app(policy, name=name, api_key=api_key, limits=limits, adapter_dir=adapter_dir)
    serve_forever(app, host, port, limits=server_limits, log_level=log_level)


class RunningServer:
    """A server on a background thread (tests, benchmarks, a trainer serving its own policy).

    ``port=0`` picks a free port; ``url`` is the ``base_url`` for an OpenAI client; ``api_key``,
    ``limits`` and ``adapter_dir`` are ``create_app``'s, ``server_limits`` the connection's deadlines
    and cap. Use as a context manager, or call ``start()``/``stop()``.
    """

    def __init__(
        self,
        policy: LocalPolicy,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        name: str | None = None,
        api_key: str | None = None,
        limits: ServeLimits | None = None,
        adapter_dir: str | Path | None = None,
        server_limits: ServerLimits | None = None,
    ) -> None:
        self.app = create_app(policy, name=name, api_key=api_key, limits=limits, adapter_dir=adapter_dir)
        self.host, self._port, self.server_limits = host, port, server_limits
        self._handle: ServerHandle | None = None

    @property
    def port(self) -> int:
        if self._handle is None:
            raise RuntimeError("the server has no port yet: start() it first")
        return self._handle.port

    @property
    def url(self) -> str:
        if self._handle is None:
            raise RuntimeError("the server has no URL yet: start() it first")
        return f"{self._handle.url}/v1"

    def start(self, timeout_s: float = 30.0) -> RunningServer:
        """Start the server thread (once: a started server is returned as it is)."""
        if self._handle is not None:
            return self
        self._handle = start_in_thread(
            self.app,
            self.host,
            self._port,
            limits=self.server_limits,
            name="verigym-serve",
            timeout_s=timeout_s,
        )
        return self

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.stop()

    def __enter__(self) -> RunningServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


def spawn_server(
    model: str, *args: str, threads: int = 1, timeout_s: float = 120.0, api_key: str | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``verigym serve MODEL *args`` in a subprocess on a free 127.0.0.1 port and wait until
    ``/health`` answers; returns the process and its ``.../v1`` base URL (the caller stops it).
    ``api_key`` reaches the server through its environment (``--api-key-env``), never its command line.

    Raises ``RuntimeError`` (the process stopped) when it exits or does not answer in time.
    """
    import httpx

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    if api_key is not None:
        env[_KEY_VAR] = api_key
        args = (*args, "--api-key-env", _KEY_VAR)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "verigym",
            "serve",
            model,
            "--port",
            str(port),
            "--threads",
            str(threads),
            *args,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    deadline = time.monotonic() + timeout_s
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                return proc, f"http://127.0.0.1:{port}/v1"
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    proc.terminate()
    proc.wait(timeout=20)
    raise RuntimeError(f"verigym serve {model} did not start on port {port} within {timeout_s:.0f}s")
