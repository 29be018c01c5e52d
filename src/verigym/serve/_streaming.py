"""SSE streaming for ``verigym serve``: ``stream=true`` chat completions (``chat.completion.chunk``) and
text completions (``text_completion``), as OpenAI and vLLM send them.

Text goes out as tokens arrive, holding back what may still be cut (special-token text, stop strings, a
tool call that may be opening); each row then ends with a chunk of the rest, its finish reason, logprobs
and token ids. A failure after the stream started ends it with an error chunk. When the client hangs up
the rows are cancelled in the batcher."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from verigym.policies.local import RowResult, RowSpec
from verigym.policies.local.chat import TOOL_FORMATS, visible_prefix
from verigym.serve._rows import Rows, response_head, tool_call, usage
from verigym.serve._wire import ApiError, ChatRequest, CompletionRequest, error_body, legacy_logprobs

__all__ = ["Streaming"]

Choice = dict[str, Any]


class Streaming(Rows):
    """The streamed responses (``Handler``'s base): ``stream`` for chat, ``stream_text`` for text."""

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

    def stream(
        self, req: ChatRequest, specs: list[RowSpec], adapter: str | None, parse: bool
    ) -> AsyncIterator[str]:
        """``/v1/chat/completions`` with ``stream=true``: a role chunk per row, then content deltas."""

        def last(i: int, spec: RowSpec, res: RowResult, sent: str) -> Choice:
            c = self.policy.completion(spec, res, parse_tools=parse)
            delta: dict[str, Any] = {}
            if c.text.startswith(sent) and len(c.text) > len(sent):
                delta["content"] = c.text[len(sent) :]
            if c.tool_calls:
                delta["tool_calls"] = [{"index": j, **tool_call(t)} for j, t in enumerate(c.tool_calls)]
            choice = self.chat_choice(i, spec, res, c, req)
            return {
                "index": i,
                "delta": delta,
                "logprobs": choice["logprobs"],
                "finish_reason": c.finish_reason,
                "token_ids": res.token_ids,
            }

        return self._sse(
            ("chatcmpl", "chat.completion.chunk"),
            req,
            specs,
            adapter,
            parse,
            opening=lambda i: {
                "index": i,
                "delta": {"role": "assistant", "content": ""},
                "finish_reason": None,
            },
            piece=lambda i, text: {"index": i, "delta": {"content": text}, "finish_reason": None},
            last=last,
        )

    def stream_text(
        self, req: CompletionRequest, specs: list[RowSpec], adapter: str | None
    ) -> AsyncIterator[str]:
        """``/v1/completions`` with ``stream=true``: ``text_completion`` chunks, as OpenAI and vLLM send."""

        def last(i: int, spec: RowSpec, res: RowResult, sent: str) -> Choice:
            c = self.policy.completion(spec, res)
            rest = c.text[len(sent) :] if c.text.startswith(sent) else ""
            logprobs = None
            if req.logprobs is not None:
                pieces = [self.piece(t) for t in res.token_ids]
                logprobs = legacy_logprobs(pieces, res.logprobs, self.top(res, req.logprobs))
            return {
                "index": i,
                "text": rest,
                "logprobs": logprobs,
                "finish_reason": c.finish_reason,
                "token_ids": res.token_ids,
            }

        return self._sse(
            ("cmpl", "text_completion"),
            req,
            specs,
            adapter,
            False,
            piece=lambda i, text: {"index": i, "text": text, "logprobs": None, "finish_reason": None},
            last=last,
        )

    async def _sse(
        self,
        kind: tuple[str, str],
        req: ChatRequest | CompletionRequest,
        specs: list[RowSpec],
        adapter: str | None,
        parse: bool,
        *,
        piece: Callable[[int, str], Choice],
        last: Callable[[int, RowSpec, RowResult, str], Choice],
        opening: Callable[[int], Choice] | None = None,
    ) -> AsyncIterator[str]:
        """The ``data:`` lines of a streamed response (``kind``: its id prefix and object): an ``opening``
        choice per row, a ``piece`` choice per new text, then each row's ``last`` choice (given the text
        sent), the usage when asked, and ``[DONE]``."""
        head = response_head(*kind, req.model)

        def chunk(choices: list[Choice], **extra: Any) -> str:
            return f"data: {json.dumps({**head, 'choices': choices, **extra})}\n\n"

        if opening is not None:
            for i in range(len(specs)):
                yield chunk([opening(i)])
        sent = [""] * len(specs)
        results: list[RowResult] = []
        try:
            async for item in self.deltas(specs, adapter, parse):
                if isinstance(item, list):
                    results = item
                    break
                i, text = item
                sent[i] += text
                yield chunk([piece(i, text)])
        except ApiError as exc:
            yield f"data: {json.dumps(error_body(str(exc), exc.type, exc.param, exc.code))}\n\n"
            return
        for i, (spec, res) in enumerate(zip(specs, results, strict=True)):
            yield chunk([last(i, spec, res, sent[i])])
        if (req.stream_options or {}).get("include_usage"):
            yield chunk([], usage=usage(len(specs[0].prompt_ids), results))
        yield "data: [DONE]\n\n"


def _pusher(
    loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[tuple[int, int] | None], row: int
) -> Callable[[int], None]:
    """A callback for the generating thread that hands each new token of ``row`` to the event loop."""

    def push(token: int) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, (row, token))

    return push
