"""``ScriptedPolicy``: answers from a Python function, for tests of harnesses and graders.

It is not a model. Use it where a test is about the harness, not the model, or as the stand-in
oracle/null policies of environments. It reports no token ids (``token_ids_exact=False``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from verigym.types import Completion, Message, Sampling, ToolCall, Usage

__all__ = ["Reply", "ScriptedPolicy"]

Reply = str | Completion | tuple[str, Sequence[ToolCall]]
ReplyFn = Callable[[Sequence[Message]], "Reply | Awaitable[Reply]"]


class ScriptedPolicy:
    """Calls ``fn(messages)`` and wraps its reply (text, ``(text, tool_calls)`` or a Completion)."""

    def __init__(self, fn: ReplyFn, *, name: str = "scripted", delay_s: float = 0.0) -> None:
        self._fn = fn
        self._name = name
        self._delay_s = delay_s
        self.calls = 0

    @property
    def name(self) -> str:
        return self._name

    async def aclose(self) -> None:
        """Nothing to release; every policy has ``aclose``."""

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[dict[str, Any]] | None = None,
        sampling: Sampling,
    ) -> Completion:
        self.calls += 1
        if self._delay_s:
            await asyncio.sleep(self._delay_s)
        reply = self._fn(messages)
        if isinstance(reply, Awaitable):
            reply = await reply
        if isinstance(reply, Completion):
            return reply
        text, calls = (reply, ()) if isinstance(reply, str) else (reply[0], tuple(reply[1]))
        words = len(text.split())
        finish = "tool_calls" if calls else "stop"
        if words > sampling.max_tokens:  # a crude stand-in for truncation, counted in words
            text, finish = " ".join(text.split()[: sampling.max_tokens]), "length"
        usage = Usage(prompt_tokens=sum(len(m.content.split()) for m in messages), completion_tokens=words)
        return Completion(text=text, tool_calls=calls, finish_reason=finish, usage=usage, model=self._name)
