"""``verigym serve``: an OpenAI-compatible HTTP server (FastAPI + uvicorn) for a ``LocalPolicy``.

Endpoints: ``GET /health``, ``GET /v1/models``, ``POST /v1/chat/completions`` (``stream=true`` as SSE),
``POST /v1/completions``, and vLLM's ``POST /v1/load_lora_adapter`` / ``/v1/unload_lora_adapter``
(``{"lora_name", "lora_path"}``; a loaded adapter is addressed by using its name as ``model``; loading
an existing name replaces its weights, so a trainer can push new ones), and SGLang's
``POST /update_weights_from_disk`` (``{"model_path", "version"}``: reload full weights). Every response carries the
exact token ids (``prompt_token_ids``, and ``token_ids`` per choice, as vLLM's ``return_token_ids``).

Requests are micro-batched: all requests that arrive while a generation pass runs are decoded together
in the next pass (``LocalPolicy.submit``). Bad requests get OpenAI-style ``{"error": ...}`` 4xx bodies.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException

from verigym.policies._lora import base_model
from verigym.policies.base import PolicyError
from verigym.policies.local import LocalPolicy
from verigym.serve._handler import Handler
from verigym.serve._wire import (
    ApiError,
    ChatRequest,
    CompletionRequest,
    LoadLoraRequest,
    UnloadLoraRequest,
    error_body,
)

__all__ = ["RunningServer", "create_app", "serve", "spawn_server"]


def create_app(policy: LocalPolicy, *, name: str | None = None, default_max_tokens: int = 512) -> FastAPI:
    """The FastAPI app serving ``policy`` under the model name ``name`` (default: the policy's name)."""
    handler = Handler(policy, name or policy.name, default_max_tokens)
    app = FastAPI(title="verigym serve", docs_url=None, redoc_url=None)
    app.state.handler = handler

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(error_body(str(exc), exc.type, exc.param, exc.code), status_code=exc.status)

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
        return JSONResponse(error_body(str(exc.detail), "invalid_request_error"), exc.status_code)

    @app.exception_handler(Exception)
    async def _crash(_: Request, exc: Exception) -> JSONResponse:
        return JSONResponse(error_body(f"internal error: {exc}", "server_error"), 500)

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
    async def chat(req: ChatRequest) -> dict[str, Any] | StreamingResponse:
        return await handler.chat(req)

    @app.post("/v1/completions", response_model=None)
    async def completions(req: CompletionRequest) -> dict[str, Any] | StreamingResponse:
        return await handler.complete(req)

    @app.post("/v1/load_lora_adapter")
    async def load_lora(req: LoadLoraRequest) -> Response:
        if req.lora_name == handler.name:
            raise ApiError(400, f"{req.lora_name!r} is the base model's name", param="lora_name")
        try:
            await asyncio.to_thread(policy.load_adapter, req.lora_path, req.lora_name)
        except PolicyError as exc:
            raise ApiError(
                404 if exc.kind == "adapter_not_found" else 400, str(exc), param="lora_path"
            ) from None
        return PlainTextResponse(f"Success: LoRA adapter '{req.lora_name}' added successfully.")

    @app.post("/v1/unload_lora_adapter")
    async def unload_lora(req: UnloadLoraRequest) -> Response:
        try:
            await asyncio.to_thread(policy.unload_adapter, req.lora_name)
        except PolicyError as exc:
            raise ApiError(404, str(exc), param="lora_name", code="model_not_found") from None
        return PlainTextResponse(f"Success: LoRA adapter '{req.lora_name}' removed successfully.")

    @app.post("/update_weights_from_disk")
    async def update_weights(req: dict[str, Any]) -> dict[str, Any]:
        """SGLang's endpoint: reload the base weights from ``model_path`` (``save_pretrained``); a trainer
        pushing full checkpoints names the ``version``, echoed here and in ``Completion.policy_version``."""
        path, version = req.get("model_path"), req.get("version")
        if not isinstance(path, str) or not (version is None or isinstance(version, int)):
            raise ApiError(400, "expected {model_path: str, version?: int}", param="model_path")
        try:
            await asyncio.to_thread(_reload, policy, path)
        except (OSError, ValueError, RuntimeError) as exc:
            raise ApiError(400, f"cannot load weights from {path!r}: {exc}", param="model_path") from None
        if version is not None:
            policy.version = version
        return {"success": True, "message": f"loaded {path}", "version": policy.version}

    return app


def _reload(policy: LocalPolicy, path: str) -> None:
    from transformers import AutoModelForCausalLM

    state = AutoModelForCausalLM.from_pretrained(path).state_dict()
    model = base_model(policy.model)
    target = model.state_dict()
    for key in [k for k in state if k not in target]:  # LoRA adapters loaded here wrap base layers
        head, _, leaf = key.rpartition(".")
        state[f"{head}.base_layer.{leaf}"] = state.pop(key)
    missing = [k for k in target if k not in state and ".lora_" not in k]
    if missing or any(k not in target for k in state):
        raise ValueError(f"the weights do not fit the served model (e.g. {(missing or list(state))[0]})")
    with policy._lock:  # not during a generation pass
        model.load_state_dict(state, strict=False)


def serve(
    policy: LocalPolicy,
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    name: str | None = None,
    log_level: str = "warning",
) -> None:
    """Serve ``policy`` until interrupted (blocking)."""
    import uvicorn

    uvicorn.run(create_app(policy, name=name), host=host, port=port, log_level=log_level)


class RunningServer:
    """A server on a background thread (tests, benchmarks, a trainer serving its own policy).

    ``port=0`` picks a free port; ``url`` is the ``base_url`` for an OpenAI client. Use as a context
    manager, or call ``start()``/``stop()``.
    """

    def __init__(
        self, policy: LocalPolicy, *, host: str = "127.0.0.1", port: int = 0, name: str | None = None
    ) -> None:
        import uvicorn

        config = uvicorn.Config(
            create_app(policy, name=name), host=host, port=port, log_level="warning", lifespan="off"
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="verigym-serve", daemon=True)
        self.host = host

    @property
    def port(self) -> int:
        return int(self._server.servers[0].sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self, timeout_s: float = 30.0) -> RunningServer:
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def __enter__(self) -> RunningServer:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


def spawn_server(
    model: str, *args: str, threads: int = 1, timeout_s: float = 120.0
) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``verigym serve MODEL *args`` in a subprocess on a free 127.0.0.1 port and wait until
    ``/health`` answers; returns the process and its ``.../v1`` base URL (the caller stops it).

    Raises ``RuntimeError`` (the process stopped) when it exits or does not answer in time.
    """
    import httpx

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
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
        env={**os.environ, "OMP_NUM_THREADS": str(threads)},
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
