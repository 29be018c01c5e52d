"""The gateway in front of a policy that is not an in-process model: a served model reached through the
model spec (``OpenAIPolicy``), an environment's scripted oracle, any ``Policy``.

Chat Completions only (streamed and not): each call is the policy's ``complete`` on the request's
messages and tools under the session's sampling (``_recording.apply``'s rule), recorded as a
``RecordedCall``. Its ids are exact only where the policy returns them (a verigym or vLLM server does;
a scripted oracle does not, and its calls are for SFT data, not RL). The Responses and Messages dialects
need the in-process model's token-level path and answer 400 here. The session's task is the episode
task the policy sees (``envs.base.episode_task``: an oracle answers from it).
"""

from __future__ import annotations

import json
import time
from typing import Any

from fastapi import FastAPI
from fastapi.responses import JSONResponse, StreamingResponse

from verigym.envs.base import _EPISODE_TASK
from verigym.gateway._recording import CURRENT, apply
from verigym.gateway._sessions import RecordedCall, Sessions
from verigym.policies.base import Policy, PolicyError
from verigym.serve.wiring import ApiError, ChatRequest, add_error_handlers, error_body
from verigym.types import Completion, Message, Sampling

__all__ = ["create_policy_app"]


def create_policy_app(policy: Policy, sessions: Sessions, *, name: str | None = None) -> FastAPI:
    """The gateway's app over a non-local ``policy`` (module doc); the router is added by the caller."""
    app = FastAPI(title="verigym gateway", docs_url=None, redoc_url=None, openapi_url=None)
    served = name or policy.name

    add_error_handlers(app)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": served, "object": "model", "owned_by": "verigym"}]}

    @app.post("/v1/responses")
    @app.post("/v1/messages")
    async def other_dialects() -> JSONResponse:
        message = (
            f"this gateway serves {type(policy).__name__}, which speaks Chat Completions only; the "
            "Responses and Messages dialects need an in-process model (--model DIR or a catalogue name)"
        )
        return JSONResponse(error_body(message, "invalid_request_error", code="dialect_unavailable"), 400)

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(req: ChatRequest) -> dict[str, Any] | StreamingResponse:
        call = CURRENT.get()
        live = None if call is None else sessions.live(call.session)
        if call is None or live is None:
            raise ApiError(
                409, "the session has ended", code="session_ended", headers={"x-should-retry": "false"}
            )
        if req.n != 1:
            raise ApiError(400, "n: the gateway samples one choice per call", param="n")
        messages = [Message.from_openai(m) for m in req.messages]
        if any(m is None for m in messages):
            raise ApiError(
                400, "messages: only text, tool calls and tool results are supported here", param="messages"
            )
        index = live.next_index()
        req = apply(req, live.session.sampling, index)
        sampling = Sampling(
            temperature=1.0 if req.temperature is None else req.temperature,
            top_p=1.0 if req.top_p is None else req.top_p,
            max_tokens=req.max_completion_tokens or req.max_tokens or 512,
            stop=req.stops(),
            seed=req.seed,
            response_format=req.response_format,
            tool_choice=req.tool_choice,
            parallel_tool_calls=req.parallel_tool_calls is not False,
        )
        started, clock = time.time(), time.monotonic()
        token = _EPISODE_TASK.set(live.task)
        try:
            completion = await policy.complete(
                [m for m in messages if m is not None], tools=req.tools, sampling=sampling
            )
        except PolicyError as exc:
            raise ApiError(
                502 if exc.retryable else 400, f"the policy failed: {exc}", code=exc.kind
            ) from None
        finally:
            _EPISODE_TASK.reset(token)
        sessions.record(
            call.session,
            RecordedCall(
                index=index,
                dialect="chat",
                completion=completion,
                messages=[dict(m) for m in req.messages],
                tools=None if req.tools is None else list(req.tools),
                started=started,
                wall_s=time.monotonic() - clock,
                stream=req.stream,
                seed=req.seed or 0,
            ),
        )
        call.indices.append(index)
        body = _chat_body(completion, req.model)
        if not req.stream:
            return body
        return StreamingResponse(_sse(body), media_type="text/event-stream")

    return app


def _chat_body(c: Completion, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": c.text or (None if c.tool_calls else "")}
    if c.tool_calls:
        message["tool_calls"] = [
            {"id": t.id, "type": "function", "function": {"name": t.name, "arguments": t.arguments}}
            for t in c.tool_calls
        ]
    out: dict[str, Any] = {
        "id": f"chatcmpl-{int(time.time() * 1e6)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": c.finish_reason}],
        "usage": {
            "prompt_tokens": c.usage.prompt_tokens,
            "completion_tokens": c.usage.completion_tokens,
            "total_tokens": c.usage.total_tokens,
        },
    }
    if c.token_ids_exact:
        out["prompt_token_ids"] = list(c.prompt_token_ids or ())
        out["choices"][0]["token_ids"] = list(c.completion_token_ids or ())
    return out


async def _sse(body: dict[str, Any]) -> Any:
    """A whole reply as ``chat.completion.chunk`` events: the role, the content, the calls, the end."""
    head = {k: body[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    choice = body["choices"][0]
    message = choice["message"]
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    if message.get("content"):
        deltas.append({"content": message["content"]})
    if message.get("tool_calls"):
        deltas.append({"tool_calls": [{"index": i, **t} for i, t in enumerate(message["tool_calls"])]})
    for delta in deltas:
        yield f"data: {json.dumps({**head, 'choices': [{'index': 0, 'delta': delta, 'finish_reason': None}]})}\n\n"
    last = {"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}
    yield f"data: {json.dumps({**head, 'choices': [last]})}\n\n"
    yield "data: [DONE]\n\n"
