"""The gateway's handler: ``verigym serve``'s ``Handler`` with a session's sampling applied and every call
recorded.

Every dialect reaches the policy through ``Handler.chat``: it builds the rows with ``specs`` and runs them
with ``run`` (directly, or from ``Streaming.deltas`` for a streamed reply), so overriding those two sees
every call whatever its dialect, streamed or not:

- ``specs`` takes the request's session from ``CURRENT`` (a context variable the middleware sets for the
  request; tasks the request starts copy it), gives the call its index, applies the session's sampling
  (``apply``) and binds the call's ``Pending`` record to the rows;
- ``run`` awaits the rows and records each as a ``RecordedCall`` built with ``policy.completion`` (the
  exact prompt and completion ids, logprobs, tool calls and finish reason). A call the client hung up
  on is not recorded (a stream's rows are cancelled; a whole reply's call raises a 499 first).

The ``model`` field routes nothing: any name reaches the run's policy (an adapter's name picks that
adapter).
"""

from __future__ import annotations

import contextvars
import time
from dataclasses import dataclass, field
from typing import Any

from verigym.gateway._sessions import Dialect, RecordedCall, Sessions
from verigym.policies.local import LocalPolicy, RowResult, RowSpec
from verigym.serve.wiring import ApiError, ChatRequest, CompletionRequest, Gone, Handler, ServeLimits
from verigym.types import Sampling

__all__ = ["CURRENT", "Call", "RecordingHandler", "apply"]


@dataclass
class Call:
    """The request being answered: its session and dialect (set by the middleware), and the indices of
    the calls it recorded (for the retry store)."""

    session: str
    dialect: Dialect
    indices: list[int] = field(default_factory=list)
    pending: Pending | None = None


@dataclass
class Pending:
    """A call whose rows were built and not yet recorded."""

    index: int
    specs: list[RowSpec]
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    parse: bool
    stream: bool
    started: float
    clock: float


CURRENT: contextvars.ContextVar[Call | None] = contextvars.ContextVar("verigym_gateway_call", default=None)


def apply(req: ChatRequest, sampling: Sampling | None, index: int) -> ChatRequest:
    """``req`` under the session's ``sampling``: its temperature, top_p and top_k replace the request's,
    its seed (when set) becomes ``sampling.seed + index``, and ``max_tokens`` is capped at
    ``sampling.max_tokens`` (a smaller request keeps its own; one without gets the cap). None: ``req``
    as sent."""
    if sampling is None:
        return req
    asked = req.max_completion_tokens or req.max_tokens
    update: dict[str, Any] = {
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
        "max_tokens": sampling.max_tokens if asked is None else min(asked, sampling.max_tokens),
        "max_completion_tokens": None,
    }
    if sampling.seed is not None:
        update["seed"] = sampling.seed + index
    return req.model_copy(update=update)


class RecordingHandler(Handler):
    """``Handler`` that applies each request's session sampling and records its calls in ``sessions``."""

    def __init__(
        self,
        policy: LocalPolicy,
        name: str,
        default_max_tokens: int,
        limits: ServeLimits | None,
        sessions: Sessions,
    ) -> None:
        super().__init__(policy, name, default_max_tokens, limits)
        self.sessions = sessions

    def adapter_for(self, model: str) -> str | None:
        if model in self.policy.adapters:
            return model
        return self.policy.active_adapter

    def specs(self, req: ChatRequest | CompletionRequest, ids: list[int], top_k: int) -> list[RowSpec]:
        call = CURRENT.get()
        if call is None or not isinstance(req, ChatRequest):  # pragma: no cover - the router sets it
            raise ApiError(500, "a gateway call without its session", type_="server_error")
        live = self.sessions.live(call.session)
        if live is None:
            raise _ended(call.session)
        if req.n != 1:
            raise ApiError(
                400,
                "n: the gateway samples one choice per call (a rollout is one trajectory); "
                "make n calls instead",
                param="n",
            )
        index = live.next_index()
        req = apply(req, live.session.sampling, index)
        specs = super().specs(req, ids, top_k)
        call.pending = Pending(
            index=index,
            specs=specs,
            messages=[dict(m) for m in req.messages],
            tools=None if req.tools is None else list(req.tools),
            parse=bool(req.tools) and req.tool_choice != "none",
            stream=req.stream,
            started=time.time(),
            clock=time.monotonic(),
        )
        return specs

    async def run(
        self, specs: list[RowSpec], adapter: str | None, gone: Gone | None = None
    ) -> list[RowResult]:
        results = await super().run(specs, adapter, gone)
        call = CURRENT.get()
        pending = None if call is None else call.pending
        if call is None or pending is None or pending.specs is not specs:  # pragma: no cover
            return results
        if results[0].finish == "cancelled":  # the client hung up mid-stream: it never got this reply
            return results
        completion = self.policy.completion(specs[0], results[0], parse_tools=pending.parse)
        recorded = RecordedCall(
            index=pending.index,
            dialect=call.dialect,
            completion=completion,
            messages=pending.messages,
            tools=pending.tools,
            started=pending.started,
            wall_s=time.monotonic() - pending.clock,
            stream=pending.stream,
            seed=specs[0].seed,
        )
        if self.sessions.record(call.session, recorded):
            call.indices.append(pending.index)
        return results


def _ended(sid: str) -> ApiError:
    return ApiError(
        409,
        f"session {sid!r} has ended: its rollout is over, so the gateway takes no more calls for it",
        code="session_ended",
        headers={"x-should-retry": "false"},
    )
