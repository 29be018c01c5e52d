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
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException

from verigym._serve_wire import (
    ApiError,
    ChatRequest,
    CompletionRequest,
    LoadLoraRequest,
    UnloadLoraRequest,
    chat_logprobs,
    error_body,
    legacy_logprobs,
    status_of,
)
from verigym.policies._chat import encode_chat
from verigym.policies.base import PolicyError
from verigym.policies.local import LocalPolicy, RowResult, RowSpec
from verigym.types import Completion, Sampling

__all__ = ["RunningServer", "create_app", "serve"]


class _Handler:
    """Turns requests into rows for the policy and results into OpenAI responses."""

    def __init__(self, policy: LocalPolicy, name: str, default_max_tokens: int) -> None:
        self.policy, self.name, self.default_max_tokens = policy, name, default_max_tokens
        self.created = int(time.time())
        self._pieces: dict[int, str] = {}

    def adapter_for(self, model: str) -> str | None:
        if model == self.name:
            return self.policy.active_adapter
        if model in self.policy.adapters:
            return model
        raise ApiError(404, f"The model `{model}` does not exist.", param="model", code="model_not_found")

    def piece(self, token_id: int) -> str:
        if token_id not in self._pieces:
            self._pieces[token_id] = self.policy.tokenizer.decode([token_id])
        return self._pieces[token_id]

    def top(self, result: RowResult, k: int) -> list[list[tuple[str, float]]] | None:
        if not k:
            return None
        return [
            [(self.piece(i), v) for i, v in zip(ids[:k], vals[:k], strict=True)]
            for ids, vals in zip(result.top_ids, result.top_logprobs, strict=True)
        ]

    def specs(self, req: ChatRequest | CompletionRequest, ids: list[int], top_k: int) -> list[RowSpec]:
        max_tokens = (
            getattr(req, "max_completion_tokens", None) or req.max_tokens
        ) or self.default_max_tokens
        sampling = Sampling(
            temperature=1.0 if req.temperature is None else req.temperature,
            top_p=1.0 if req.top_p is None else req.top_p,
            top_k=req.top_k if req.top_k and req.top_k > 0 else None,
            max_tokens=max_tokens,
            stop=req.stops(),
            top_logprobs=top_k,
        )
        seeds = [None if req.seed is None else req.seed + i for i in range(req.n)]
        return [self.policy.spec(ids, sampling, s) for s in seeds]

    async def run(self, specs: list[RowSpec], adapter: str | None) -> list[RowResult]:
        try:
            return await self.policy.submit(specs, adapter)
        except PolicyError as exc:
            raise status_of(exc) from None

    def chat_choice(
        self, i: int, spec: RowSpec, res: RowResult, c: Completion, req: ChatRequest
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": c.text or (None if c.tool_calls else "")}
        if c.tool_calls:
            message["tool_calls"] = [_tool_call(t) for t in c.tool_calls]
        logprobs = None
        if req.logprobs:
            pieces = [self.piece(t) for t in res.token_ids]
            logprobs = chat_logprobs(pieces, res.logprobs, self.top(res, req.top_logprobs or 0))
        return {
            "index": i,
            "message": message,
            "logprobs": logprobs,
            "finish_reason": c.finish_reason,
            "token_ids": res.token_ids,
        }

    async def chat(self, req: ChatRequest) -> dict[str, Any] | StreamingResponse:
        adapter = self.adapter_for(req.model)
        try:
            ids = encode_chat(self.policy.tokenizer, req.messages, req.tools)
            specs = self.specs(req, ids, (req.top_logprobs or 0) if req.logprobs else 0)
        except PolicyError as exc:
            raise status_of(exc) from None
        parse = bool(req.tools) and req.tool_choice != "none"
        if req.stream:
            return StreamingResponse(self.stream(req, specs, adapter, parse), media_type="text/event-stream")
        results = await self.run(specs, adapter)
        comps = [self.policy.completion(s, r, parse_tools=parse) for s, r in zip(specs, results, strict=True)]
        choices = [
            self.chat_choice(i, *x, req) for i, x in enumerate(zip(specs, results, comps, strict=True))
        ]
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": req.model,
            "choices": choices,
            "usage": _usage(ids, results),
            "prompt_token_ids": ids,
        }

    async def stream(
        self, req: ChatRequest, specs: list[RowSpec], adapter: str | None, parse: bool
    ) -> AsyncIterator[str]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[int, int] | None] = asyncio.Queue()
        for i, spec in enumerate(specs):
            spec.on_token = _pusher(loop, queue, i)
        task = asyncio.ensure_future(self.run(specs, adapter))
        task.add_done_callback(lambda _: queue.put_nowait(None))
        head = {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": req.model,
        }

        def chunk(choices: list[dict[str, Any]], **extra: Any) -> str:
            return f"data: {json.dumps({**head, 'choices': choices, **extra})}\n\n"

        for i in range(len(specs)):
            yield chunk([{"index": i, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])
        hold = max((len(s) for s in specs[0].stop), default=1) - 1
        ids: list[list[int]] = [[] for _ in specs]
        sent = [""] * len(specs)
        while (item := await queue.get()) is not None:
            i, tok = item
            ids[i].append(tok)
            text = self.policy.tokenizer.decode(ids[i], skip_special_tokens=True).rstrip("\ufffd")
            cuts = [text.find(s) for s in specs[i].stop if s in text]
            safe = text[: min(cuts)] if cuts else text[: len(text) - hold] if hold else text
            if parse and "<" in safe:
                safe = safe[: safe.index("<")]
            if len(safe) > len(sent[i]) and safe.startswith(sent[i]):
                yield chunk([{"index": i, "delta": {"content": safe[len(sent[i]) :]}, "finish_reason": None}])
                sent[i] = safe
        try:
            results = task.result()
        except ApiError as exc:
            yield f"data: {json.dumps(error_body(str(exc), exc.type, exc.param, exc.code))}\n\n"
            return
        for i, (spec, res) in enumerate(zip(specs, results, strict=True)):
            c = self.policy.completion(spec, res, parse_tools=parse)
            delta: dict[str, Any] = {}
            if c.text.startswith(sent[i]) and len(c.text) > len(sent[i]):
                delta["content"] = c.text[len(sent[i]) :]
            if c.tool_calls:
                delta["tool_calls"] = [{"index": j, **_tool_call(t)} for j, t in enumerate(c.tool_calls)]
            choice = self.chat_choice(i, spec, res, c, req)
            yield chunk(
                [
                    {
                        "index": i,
                        "delta": delta,
                        "logprobs": choice["logprobs"],
                        "finish_reason": c.finish_reason,
                        "token_ids": res.token_ids,
                    }
                ]
            )
        if (req.stream_options or {}).get("include_usage"):
            yield chunk([], usage=_usage(specs[0].prompt_ids, results))
        yield "data: [DONE]\n\n"

    async def complete(self, req: CompletionRequest) -> dict[str, Any]:
        adapter = self.adapter_for(req.model)
        if req.stream or req.echo:
            raise ApiError(400, "stream and echo are not supported on /v1/completions", param="stream")
        prompts = self.prompt_ids(req.prompt)
        try:
            per_prompt = [self.specs(req, ids, req.logprobs or 0) for ids in prompts]
        except PolicyError as exc:
            raise status_of(exc) from None
        flat = [s for specs in per_prompt for s in specs]
        results = await self.run(flat, adapter)
        choices = []
        for i, (spec, res) in enumerate(zip(flat, results, strict=True)):
            c = self.policy.completion(spec, res)
            logprobs = None
            if req.logprobs is not None:
                pieces = [self.piece(t) for t in res.token_ids]
                logprobs = legacy_logprobs(pieces, res.logprobs, self.top(res, req.logprobs))
            choices.append(
                {
                    "index": i,
                    "text": c.text,
                    "logprobs": logprobs,
                    "finish_reason": c.finish_reason,
                    "token_ids": res.token_ids,
                    "prompt_token_ids": spec.prompt_ids,
                }
            )
        return {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": req.model,
            "choices": choices,
            "usage": {
                "prompt_tokens": sum(len(p) for p in prompts) * req.n,
                "completion_tokens": sum(len(r.token_ids) for r in results),
                "total_tokens": sum(len(p) for p in prompts) * req.n + sum(len(r.token_ids) for r in results),
            },
            "prompt_token_ids": prompts[0] if len(prompts) == 1 else prompts,
        }

    def prompt_ids(self, prompt: str | list[str] | list[int] | list[list[int]]) -> list[list[int]]:
        items: list[Any] = [prompt] if isinstance(prompt, str) else list(prompt)
        if not items:
            raise ApiError(400, "prompt must not be empty", param="prompt")
        if all(isinstance(x, int) for x in items):
            items = [items]
        vocab = len(self.policy.tokenizer)
        out: list[list[int]] = []
        for item in items:
            ids = self.policy.tokenizer(item)["input_ids"] if isinstance(item, str) else list(item)
            if not ids or any(not 0 <= t < vocab for t in ids):
                raise ApiError(400, f"prompt token ids must be non-empty and in [0, {vocab})", param="prompt")
            out.append(ids)
        return out


def _pusher(
    loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[tuple[int, int] | None], row: int
) -> Callable[[int], None]:
    """A callback for the generating thread that hands each new token of ``row`` to the event loop."""

    def push(token: int) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, (row, token))

    return push


def _tool_call(t: Any) -> dict[str, Any]:
    return {"id": t.id, "type": "function", "function": {"name": t.name, "arguments": t.arguments}}


def _usage(prompt_ids: list[int], results: list[RowResult]) -> dict[str, int]:
    done = sum(len(r.token_ids) for r in results)
    return {
        "prompt_tokens": len(prompt_ids),
        "completion_tokens": done,
        "total_tokens": len(prompt_ids) + done,
    }


def create_app(policy: LocalPolicy, *, name: str | None = None, default_max_tokens: int = 512) -> FastAPI:
    """The FastAPI app serving ``policy`` under the model name ``name`` (default: the policy's name)."""
    handler = _Handler(policy, name or policy.name, default_max_tokens)
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
        message = f"{'.'.join(loc) or 'body'}: {first.get('msg', 'invalid request')}"
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

    @app.post("/v1/completions")
    async def completions(req: CompletionRequest) -> dict[str, Any]:
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
    target = policy.model.state_dict()
    for key in [k for k in state if k not in target]:  # LoRA adapters loaded here wrap base layers
        head, _, leaf = key.rpartition(".")
        state[f"{head}.base_layer.{leaf}"] = state.pop(key)
    missing = [k for k in target if k not in state and ".lora_" not in k]
    if missing or any(k not in target for k in state):
        raise ValueError(f"the weights do not fit the served model (e.g. {(missing or list(state))[0]})")
    with policy._lock:  # not during a generation pass
        policy.model.load_state_dict(state, strict=False)


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
