"""The replies of the Responses API (``_responses``): the ``response`` object, and OpenAI's event stream.

A reply is a ``message`` item with the text (when there is text, or nothing else), then a
``function_call`` item per call, ids kept; the response is ``completed``, or ``incomplete`` (reason
``max_output_tokens``) when the reply was cut. Streamed: ``response.created``, ``response.in_progress``,
then per item ``response.output_item.added``, for text ``response.content_part.added``,
``response.output_text.delta``..., ``response.output_text.done``, ``response.content_part.done``, for a
call ``response.function_call_arguments.delta``/``.done``, then ``response.output_item.done``; last
``response.completed`` (or ``response.incomplete``), each with its ``sequence_number``. A failure midway
sends ``error`` and ``response.failed``. Extensions sit on the response object only (clients send
items back as input): ``prompt_token_ids``, ``token_ids`` and, when asked for, ``logprobs``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from verigym.serve._generation import CallPiece, Generation, TextPiece, sse
from verigym.serve._responses import ResponsesBody
from verigym.serve._wire import ApiError

__all__ = ["Reply", "response_object", "stream_events"]


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


class Reply:
    """A response being built: its id, time and output items."""

    def __init__(self, body: ResponsesBody) -> None:
        self.body, self.id, self.created = body, _id("resp"), time.time()
        self.items: list[dict[str, Any]] = []

    def text_item(self, text: str, status: str, logprobs: list[dict[str, Any]] | None) -> dict[str, Any]:
        part: dict[str, Any] = {"type": "output_text", "text": text, "annotations": []}
        if self.body.logprobs():
            part["logprobs"] = logprobs or []
        return {"id": _id("msg"), "type": "message", "role": "assistant", "status": status, "content": [part]}

    def call_item(self, call_id: str, name: str, arguments: str, status: str) -> dict[str, Any]:
        return {
            "id": _id("fc"),
            "type": "function_call",
            "status": status,
            "call_id": call_id,
            "name": name,
            "arguments": arguments,
        }

    def obj(self, gen: Generation | None) -> dict[str, Any]:
        """The ``response`` object: in progress without ``gen``, else completed or incomplete."""
        b = self.body
        status = (
            "in_progress" if gen is None else "incomplete" if gen.finish_reason == "length" else "completed"
        )
        out: dict[str, Any] = {
            "id": self.id,
            "object": "response",
            "created_at": self.created,
            "status": status,
            "completed_at": None if gen is None else time.time(),
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "instructions": b.instructions,
            "max_output_tokens": b.max_output_tokens,
            "model": b.model,
            "output": self.items if gen is not None else [],
            "parallel_tool_calls": b.parallel_tool_calls is not False,
            "previous_response_id": None,
            "reasoning": None,
            "store": b.store is not False,
            "temperature": b.temperature,
            "top_p": b.top_p,
            "top_logprobs": b.top_logprobs,
            "text": b.text or {"format": {"type": "text"}},
            "tool_choice": b.tool_choice or "auto",
            "tools": [{"strict": None, "parameters": None, **t} for t in b.tools or []],
            "truncation": "disabled",
            "background": False,
            "service_tier": "default",
            "metadata": b.metadata or {},
            "user": b.user,
            "safety_identifier": b.safety_identifier,
            "prompt_cache_key": b.prompt_cache_key,
            "usage": None,
        }
        if gen is not None:
            n_in, n_out = len(gen.prompt_token_ids), gen.completion_tokens
            out["usage"] = {
                "input_tokens": n_in,
                "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens": n_out,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": n_in + n_out,
            }
            out["prompt_token_ids"], out["token_ids"] = gen.prompt_token_ids, gen.token_ids
            if b.logprobs():
                out["logprobs"] = {"content": gen.logprobs or []}
        return out


def response_object(body: ResponsesBody, gen: Generation) -> dict[str, Any]:
    """The non-streamed ``response``: a message item (when there is text or no call), then the calls."""
    reply = Reply(body)
    status = "incomplete" if gen.finish_reason == "length" else "completed"
    if gen.text or not gen.calls:
        reply.items.append(reply.text_item(gen.text, status, gen.logprobs))
    reply.items += [reply.call_item(c.id, c.name, c.arguments, "completed") for c in gen.calls]
    return reply.obj(gen)


async def stream_events(body: ResponsesBody, pieces: AsyncIterator[Any]) -> AsyncIterator[str]:
    """The Responses stream of a streamed generation: ``response.created``, ``response.in_progress``,
    each output item (added, its deltas, done), then ``response.completed`` (``response.incomplete``
    at ``max_output_tokens``); a failure midway sends ``error`` and ``response.failed``."""
    reply, seq = Reply(body), 0
    open_item: dict[str, Any] | None = None
    text = ""

    def event(kind: str, **fields: Any) -> str:
        nonlocal seq
        seq += 1
        return sse({"type": kind, "sequence_number": seq - 1, **fields})

    def close(gen: Generation | None) -> list[str]:
        nonlocal open_item
        item, open_item = open_item, None
        if item is None:
            return []
        at = {"item_id": item["id"], "output_index": len(reply.items) - 1}
        if item["type"] == "message":
            status = "incomplete" if gen is not None and gen.finish_reason == "length" else "completed"
            lps = gen.logprobs if gen is not None and body.logprobs() else []
            done = reply.text_item(text, status, lps)
            done["id"] = item["id"]
            reply.items[-1] = done
            part = done["content"][0]
            return [
                event("response.output_text.done", **at, content_index=0, text=text, logprobs=lps or []),
                event("response.content_part.done", **at, content_index=0, part=part),
                event("response.output_item.done", output_index=at["output_index"], item=done),
            ]
        done = {**item, "status": "completed"}
        reply.items[-1] = done
        return [
            event("response.function_call_arguments.done", **at, arguments=item["arguments"]),
            event("response.output_item.done", output_index=at["output_index"], item=done),
        ]

    def open_(item: dict[str, Any]) -> list[str]:
        nonlocal open_item, text
        out = close(None)
        open_item, text = item, ""
        reply.items.append(item)
        out.append(event("response.output_item.added", output_index=len(reply.items) - 1, item=item))
        if item["type"] == "message":
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            at = {"item_id": item["id"], "output_index": len(reply.items) - 1}
            out.append(event("response.content_part.added", **at, content_index=0, part=part))
        return out

    yield event("response.created", response=reply.obj(None))
    yield event("response.in_progress", response=reply.obj(None))
    try:
        async for piece in pieces:
            if isinstance(piece, TextPiece):
                if open_item is None or open_item["type"] != "message":
                    for line in open_({**reply.text_item("", "in_progress", None), "content": []}):
                        yield line
                text += piece.text
                at = {"item_id": open_item["id"], "output_index": len(reply.items) - 1}  # type: ignore[index]
                yield event(
                    "response.output_text.delta", **at, content_index=0, delta=piece.text, logprobs=[]
                )
            elif isinstance(piece, CallPiece):
                if piece.id:
                    for line in open_(reply.call_item(piece.id, piece.name, "", "in_progress")):
                        yield line
                if piece.arguments and open_item is not None:
                    open_item["arguments"] += piece.arguments
                    at = {"item_id": open_item["id"], "output_index": len(reply.items) - 1}
                    yield event("response.function_call_arguments.delta", **at, delta=piece.arguments)
            else:
                gen: Generation = piece
                if not reply.items:  # no text and no call: an empty message, as OpenAI sends
                    for line in open_({**reply.text_item("", "in_progress", None), "content": []}):
                        yield line
                for line in close(gen):
                    yield line
                final = reply.obj(gen)
                yield event(f"response.{final['status']}", response=final)
    except ApiError as exc:
        yield event("error", code=exc.code or "server_error", message=str(exc), param=exc.param)
        failed = {
            **reply.obj(None),
            "status": "failed",
            "error": {"code": "server_error", "message": str(exc)},
        }
        yield event("response.failed", response=failed)
