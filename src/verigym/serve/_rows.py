"""What every endpoint of ``verigym serve`` builds on: a request's rows for ``LocalPolicy.submit`` and
running them, token pieces and top logprobs for the logprob formats, and the parts of a response that
chat and text completions, streamed or not, share.

A client that hangs up has its rows cancelled as soon as ``gone`` (the connection's disconnect) fires."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from verigym.policies.base import PolicyError
from verigym.policies.local import LocalPolicy, RowResult, RowSpec
from verigym.serve._wire import ApiError, ChatRequest, CompletionRequest, chat_logprobs, status_of
from verigym.types import Completion, Sampling

__all__ = ["Gone", "Rows", "response_head", "tool_call", "usage"]

Gone = Callable[[], Awaitable[None]]  # returns once the client has closed its connection


class Rows:
    """A request's rows for the policy and their results (``Handler``'s base)."""

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
            top_k=min(req.top_k, len(self.policy.tokenizer)) if req.top_k and req.top_k > 0 else None,
            max_tokens=max_tokens,
            stop=req.stops(),
            top_logprobs=top_k,
        )
        if isinstance(req, ChatRequest):  # structured outputs (``policies.local._grammar``)
            sampling = sampling.model_copy(
                update={
                    "response_format": req.response_format,
                    "tool_choice": req.tool_choice,
                    "parallel_tool_calls": req.parallel_tool_calls is not False,
                }
            )
        grammar = self.policy.constraint(sampling, req.tools) if isinstance(req, ChatRequest) else None
        seeds = [None if req.seed is None else req.seed + i for i in range(req.n)]
        return [self.policy.spec(ids, sampling, s, constraint=grammar) for s in seeds]

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
            message["tool_calls"] = [tool_call(t) for t in c.tool_calls]
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


def response_head(prefix: str, kind: str, model: str) -> dict[str, Any]:
    """The fields that lead every response and chunk: a fresh ``prefix-...`` id, its ``object`` kind,
    the time and the model as requested."""
    return {"id": f"{prefix}-{uuid.uuid4().hex}", "object": kind, "created": int(time.time()), "model": model}


def tool_call(t: Any) -> dict[str, Any]:
    return {"id": t.id, "type": "function", "function": {"name": t.name, "arguments": t.arguments}}


def usage(prompt_tokens: int, results: list[RowResult]) -> dict[str, int]:
    done = sum(len(r.token_ids) for r in results)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": done, "total_tokens": prompt_tokens + done}


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark an abandoned pass's outcome as seen (no "exception was never retrieved" warning)."""
    if not task.cancelled():
        task.exception()
