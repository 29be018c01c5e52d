"""The request handling of ``verigym serve``: OpenAI requests in, rows for ``LocalPolicy.submit``, OpenAI
responses (and SSE chunks) out. ``_app`` wires it into FastAPI.

Before any work a request passes ``_admission``: a prompt too long for the context is refused before it
is tokenized, and the rows' tokens are counted against the server's limits (429 when full) until the
response ends. A client that hangs up has its rows cancelled: a stream when the server notices the
closed connection, any other request as soon as ``gone`` (the connection's disconnect) fires."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi.responses import StreamingResponse

from verigym.policies.base import PolicyError
from verigym.policies.local import LocalPolicy, RowResult, RowSpec, Scored
from verigym.policies.local.chat import TOOL_FORMATS, encode_chat, visible_prefix
from verigym.serve._admission import Admission, PromptBound, admitted_stream, rows_cost, text_chars
from verigym.serve._guard import ServeLimits
from verigym.serve._wire import (
    ApiError,
    ChatRequest,
    CompletionRequest,
    chat_logprobs,
    error_body,
    legacy_logprobs,
    status_of,
)
from verigym.types import Completion, Sampling

__all__ = ["Gone", "Handler"]

Gone = Callable[[], Awaitable[None]]  # returns once the client has closed its connection


class Handler:
    """Turns requests into rows for the policy and results into OpenAI responses."""

    def __init__(
        self, policy: LocalPolicy, name: str, default_max_tokens: int, limits: ServeLimits | None = None
    ) -> None:
        self.policy, self.name, self.default_max_tokens = policy, name, default_max_tokens
        self.created = int(time.time())
        self._pieces: dict[int, str] = {}
        self.admission = Admission(limits or ServeLimits())
        self.bound = PromptBound(policy.tokenizer, policy.context_length)

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
            top_k=min(req.top_k, len(self.policy.tokenizer)) if req.top_k and req.top_k > 0 else None,
            max_tokens=max_tokens,
            stop=req.stops(),
            top_logprobs=top_k,
        )
        seeds = [None if req.seed is None else req.seed + i for i in range(req.n)]
        return [self.policy.spec(ids, sampling, s) for s in seeds]

    async def run(
        self, specs: list[RowSpec], adapter: str | None, gone: Gone | None = None
    ) -> list[RowResult]:
        """The rows' results; if ``gone`` fires first (or this call is cancelled) the rows are cancelled
        in the batcher and a 499 is raised (nobody reads it)."""
        work = asyncio.ensure_future(self.policy.submit(specs, adapter))
        watch = asyncio.ensure_future(gone()) if gone is not None else None
        try:
            await asyncio.wait(
                {work} if watch is None else {work, watch}, return_when=asyncio.FIRST_COMPLETED
            )
            if not work.done():
                raise ApiError(499, "the client closed the connection", code="client_closed_request")
            return work.result()
        except PolicyError as exc:
            raise status_of(exc) from None
        finally:
            if watch is not None:
                watch.cancel()
            if not work.done():
                for spec in specs:
                    spec.cancelled = True
                work.add_done_callback(_retrieve)

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

    async def chat(self, req: ChatRequest, gone: Gone | None = None) -> dict[str, Any] | StreamingResponse:
        adapter = self.adapter_for(req.model)
        self.bound.check(text_chars(req.messages) + text_chars(req.tools), "messages")
        try:
            ids = encode_chat(
                self.policy.tokenizer, req.messages, req.tools, tool_format=self.policy.tool_format
            )
            specs = self.specs(req, ids, (req.top_logprobs or 0) if req.logprobs else 0)
        except PolicyError as exc:
            raise status_of(exc) from None
        parse = bool(req.tools) and req.tool_choice != "none"
        release = self.admission.admit(rows_cost(specs))
        if req.stream:
            return admitted_stream(self.stream(req, specs, adapter, parse), release)
        try:
            results = await self.run(specs, adapter, gone)
        finally:
            release()
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

    async def deltas(
        self, specs: list[RowSpec], adapter: str | None, parse: bool
    ) -> AsyncIterator[tuple[int, str] | list[RowResult]]:
        """``(row, new text)`` as tokens arrive, then the rows' results. Special-token text and stop
        strings are held back; with ``parse`` so is anything that may open a tool call (from a ``<`` in
        the tag formats; see ``ToolFormat.holdback``).
        When the consumer stops early (the client hung up) the rows are cancelled in the batcher."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[int, int] | None] = asyncio.Queue()
        for i, spec in enumerate(specs):
            spec.on_token = _pusher(loop, queue, i)
        task = asyncio.ensure_future(self.run(specs, adapter))
        task.add_done_callback(lambda _: queue.put_nowait(None))
        markers = self.policy.markers
        fmt = TOOL_FORMATS[self.policy.tool_format]
        hold = max((len(s) for s in specs[0].stop), default=1) - 1
        ids: list[list[int]] = [[] for _ in specs]
        sent = [""] * len(specs)
        try:
            while (item := await queue.get()) is not None:
                i, tok = item
                ids[i].append(tok)
                text = self.policy.tokenizer.decode(ids[i], skip_special_tokens=True).rstrip("\ufffd")
                cuts = [text.find(s) for s in specs[i].stop if s in text]
                safe = text[: min(cuts)] if cuts else text[: len(text) - hold] if hold else text
                if parse:  # a tool call may be opening: hold it for the parser
                    safe = fmt.holdback(safe)
                safe = visible_prefix(safe, markers)
                if len(safe) > len(sent[i]) and safe.startswith(sent[i]):
                    yield i, safe[len(sent[i]) :]
                    sent[i] = safe
            yield task.result()
        finally:
            if not task.done():
                for spec in specs:
                    spec.cancelled = True

    async def stream(
        self, req: ChatRequest, specs: list[RowSpec], adapter: str | None, parse: bool
    ) -> AsyncIterator[str]:
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
        sent = [""] * len(specs)
        results: list[RowResult] = []
        try:
            async for item in self.deltas(specs, adapter, parse):
                if isinstance(item, list):
                    results = item
                    break
                i, text = item
                sent[i] += text
                yield chunk([{"index": i, "delta": {"content": text}, "finish_reason": None}])
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

    async def stream_text(
        self, req: CompletionRequest, specs: list[RowSpec], adapter: str | None
    ) -> AsyncIterator[str]:
        """``/v1/completions`` with ``stream=true``: ``text_completion`` chunks, as OpenAI and vLLM send."""
        head = {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": req.model,
        }

        def chunk(choices: list[dict[str, Any]], **extra: Any) -> str:
            return f"data: {json.dumps({**head, 'choices': choices, **extra})}\n\n"

        sent = [""] * len(specs)
        results: list[RowResult] = []
        try:
            async for item in self.deltas(specs, adapter, False):
                if isinstance(item, list):
                    results = item
                    break
                i, text = item
                sent[i] += text
                yield chunk([{"index": i, "text": text, "logprobs": None, "finish_reason": None}])
        except ApiError as exc:
            yield f"data: {json.dumps(error_body(str(exc), exc.type, exc.param, exc.code))}\n\n"
            return
        for i, (spec, res) in enumerate(zip(specs, results, strict=True)):
            c = self.policy.completion(spec, res)
            rest = c.text[len(sent[i]) :] if c.text.startswith(sent[i]) else ""
            logprobs = None
            if req.logprobs is not None:
                pieces = [self.piece(t) for t in res.token_ids]
                logprobs = legacy_logprobs(pieces, res.logprobs, self.top(res, req.logprobs))
            yield chunk(
                [
                    {
                        "index": i,
                        "text": rest,
                        "logprobs": logprobs,
                        "finish_reason": c.finish_reason,
                        "token_ids": res.token_ids,
                    }
                ]
            )
        if (req.stream_options or {}).get("include_usage"):
            yield chunk([], usage=_usage(specs[0].prompt_ids, results))
        yield "data: [DONE]\n\n"

    async def complete(
        self, req: CompletionRequest, gone: Gone | None = None
    ) -> dict[str, Any] | StreamingResponse:
        adapter = self.adapter_for(req.model)
        if req.echo and req.stream:
            raise ApiError(400, "echo takes stream=false", param="echo")
        prompts = self.prompt_ids(req.prompt)
        try:  # max_tokens = 0 (with echo): score the prompts, generate nothing
            per_prompt = [
                self.specs(req, ids, req.logprobs or 0) if req.max_tokens != 0 else [] for ids in prompts
            ]
        except PolicyError as exc:
            raise status_of(exc) from None
        flat = [s for specs in per_prompt for s in specs]
        if req.stream and len(prompts) > 1:
            raise ApiError(400, "stream=true takes one prompt", param="prompt")
        release = self.admission.admit(rows_cost(flat) if flat else sum(map(len, prompts)) * req.n)
        if req.stream:
            return admitted_stream(self.stream_text(req, flat, adapter), release)
        try:
            results = await self.run(flat, adapter, gone) if flat else []
            echoed = await self.echo_logprobs(req, prompts, adapter)
        finally:
            release()
        owners = [p for p, specs in enumerate(per_prompt) for _ in specs]
        rows: list[tuple[int, RowSpec | None, RowResult | None]] = list(
            zip(owners, flat, results, strict=True)
        )
        if not flat:
            rows = [(p, None, None) for p in range(len(prompts)) for _ in range(req.n)]
        choices = [
            self.text_choice(i, req, prompts[p], spec, res, None if echoed is None else echoed[p])
            for i, (p, spec, res) in enumerate(rows)
        ]
        done = sum(len(r.token_ids) for r in results)
        return {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": req.model,
            "choices": choices,
            "usage": {
                "prompt_tokens": sum(len(p) for p in prompts) * req.n,
                "completion_tokens": done,
                "total_tokens": sum(len(p) for p in prompts) * req.n + done,
            },
            "prompt_token_ids": prompts[0] if len(prompts) == 1 else prompts,
        }

    async def echo_logprobs(
        self, req: CompletionRequest, prompts: list[list[int]], adapter: str | None
    ) -> list[Scored] | None:
        """With ``echo`` and ``logprobs``: each prompt's token logprobs at the request's temperature
        (``LocalPolicy.score``: the distribution sampled tokens' logprobs come from; T = 1 for 0)."""
        if not (req.echo and req.logprobs is not None):
            return None
        temperature = 1.0 if req.temperature is None else req.temperature
        return await asyncio.to_thread(
            self.policy.score, prompts, temperature=temperature, top=req.logprobs, adapter=adapter
        )

    def text_choice(
        self,
        i: int,
        req: CompletionRequest,
        prompt: list[int],
        spec: RowSpec | None,
        res: RowResult | None,
        echoed: Scored | None,
    ) -> dict[str, Any]:
        """One choice of a text completion; with ``echo`` the prompt's text, tokens and logprobs lead."""
        c = None if spec is None or res is None else self.policy.completion(spec, res)
        text = "" if c is None else c.text
        token_ids = [] if res is None else res.token_ids
        pieces = [self.piece(t) for t in token_ids]
        lps: list[float | None] = [] if res is None else list(res.logprobs)
        top: list[list[tuple[str, float]] | None] | None = None
        if req.logprobs and res is not None:
            top = list(self.top(res, req.logprobs) or [])
        if req.echo:
            text = self.policy.tokenizer.decode(prompt) + text
            pieces = [self.piece(t) for t in prompt] + pieces
            if echoed is not None:
                lps = [None, *echoed.logprobs, *lps]
                if req.logprobs:
                    head = [
                        [(self.piece(t), v) for t, v in zip(ids, vals, strict=True)]
                        for ids, vals in zip(echoed.top_ids, echoed.top_logprobs, strict=True)
                    ]
                    top = [None, *head, *(top or [])]
        return {
            "index": i,
            "text": text,
            "logprobs": None if req.logprobs is None else legacy_logprobs(pieces, lps, top),
            "finish_reason": "length" if c is None else c.finish_reason,
            "token_ids": token_ids,
            "prompt_token_ids": prompt,
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
            if isinstance(item, str):
                self.bound.check(len(item), "prompt")
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


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark an abandoned pass's outcome as seen (no "exception was never retrieved" warning)."""
    if not task.cancelled():
        task.exception()


def _tool_call(t: Any) -> dict[str, Any]:
    return {"id": t.id, "type": "function", "function": {"name": t.name, "arguments": t.arguments}}


def _usage(prompt_ids: list[int], results: list[RowResult]) -> dict[str, int]:
    done = sum(len(r.token_ids) for r in results)
    return {
        "prompt_tokens": len(prompt_ids),
        "completion_tokens": done,
        "total_tokens": len(prompt_ids) + done,
    }
