"""The request handling of ``verigym serve``: OpenAI requests in, rows for ``LocalPolicy.submit``, OpenAI
responses out. ``_app`` wires it into FastAPI; ``Handler`` builds on ``_rows`` (a request's rows and
running them) and ``_streaming`` (the SSE responses of ``stream=true``).

Before any work a request passes ``_admission``: a prompt too long for the context is refused before it
is tokenized, and the rows' tokens are counted against the server's limits (429 when full) until the
response ends. A client that hangs up has its rows cancelled: a stream when the server notices the
closed connection, any other request as soon as ``gone`` (the connection's disconnect) fires."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi.responses import StreamingResponse

from verigym.policies.base import PolicyError
from verigym.policies.local import LocalPolicy, RowResult, RowSpec, Scored
from verigym.policies.local.chat import encode_chat
from verigym.serve._admission import Admission, PromptBound, admitted_stream, rows_cost, text_chars
from verigym.serve._fields import check_extras
from verigym.serve._guard import ServeLimits
from verigym.serve._rows import Gone, response_head, usage
from verigym.serve._streaming import Streaming
from verigym.serve._wire import ApiError, ChatRequest, CompletionRequest, legacy_logprobs, status_of
from verigym.types import Message

__all__ = ["Gone", "Handler"]


class Handler(Streaming):
    """Turns requests into rows for the policy and results into OpenAI responses."""

    def __init__(
        self, policy: LocalPolicy, name: str, default_max_tokens: int, limits: ServeLimits | None = None
    ) -> None:
        super().__init__(policy, name, default_max_tokens)
        self.admission = Admission(limits or ServeLimits())
        self.bound = PromptBound(policy.tokenizer, policy.context_length)

    async def chat(self, req: ChatRequest, gone: Gone | None = None) -> dict[str, Any] | StreamingResponse:
        check_extras(req)
        adapter = self.adapter_for(req.model)
        self.bound.check(text_chars(req.messages) + text_chars(req.tools), "messages")
        try:
            ids = self.encode(req)
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
            **response_head("chatcmpl", "chat.completion", req.model),
            "choices": choices,
            "usage": usage(len(ids), results),
            "prompt_token_ids": ids,
        }

    def encode(self, req: ChatRequest) -> list[int]:
        """The prompt's token ids. Token-exact over turns: where every message reads as a ``Message``, the
        policy encodes it (``LocalPolicy.encode``), so a conversation sent back with the model's earlier
        reply keeps the ids it sampled rather than a re-tokenisation (``policies.local._history``)."""
        messages = [Message.from_openai(m) for m in req.messages]
        if all(m is not None for m in messages):
            return self.policy.encode([m for m in messages if m is not None], req.tools)
        return encode_chat(
            self.policy.tokenizer, req.messages, req.tools, tool_format=self.policy.tool_format
        )

    async def complete(
        self, req: CompletionRequest, gone: Gone | None = None
    ) -> dict[str, Any] | StreamingResponse:
        check_extras(req)
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
        return {
            **response_head("cmpl", "text_completion", req.model),
            "choices": choices,
            "usage": usage(sum(len(p) for p in prompts) * req.n, results),
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
