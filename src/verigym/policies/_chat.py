"""Chat rendering and tool-call parsing shared by ``LocalPolicy`` and ``verigym serve``.

Prompts are rendered with the tokenizer's own chat template. Tool calls are parsed from the
Hermes-style markup ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` that the tiny models'
template uses (as do Qwen2.5/Qwen3 and Hermes templates); a block that is not valid JSON with a
``name`` stays in the text, so a grader can see the malformed call.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

from verigym.policies.base import PolicyError
from verigym.types import Message, ToolCall

__all__ = ["encode_chat", "parse_tool_calls", "special_texts", "strip_markers", "visible_prefix"]

_BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)


def encode_chat(
    tokenizer: Any,
    messages: Sequence[Message | dict[str, Any]],
    tools: Sequence[dict[str, Any]] | None = None,
    *,
    add_generation_prompt: bool = True,
) -> list[int]:
    """Token ids of ``messages`` rendered by the tokenizer's chat template, ending with the assistant cue."""
    if getattr(tokenizer, "chat_template", None) is None:
        raise PolicyError("bad_request", "this tokenizer has no chat template; use a raw-text completion")
    convo = [m.to_openai() if isinstance(m, Message) else m for m in messages]
    try:
        text = tokenizer.apply_chat_template(
            convo,
            tools=list(tools) if tools else None,
            add_generation_prompt=add_generation_prompt,
            tokenize=False,
        )
    except Exception as exc:  # jinja errors, templates that reject a role...
        raise PolicyError("bad_request", f"chat template failed: {exc}") from None
    ids: list[int] = tokenizer(text, add_special_tokens=False)["input_ids"]
    return ids


def parse_tool_calls(text: str, salt: str = "") -> tuple[str, tuple[ToolCall, ...]]:
    """Split model output into (content without the parsed tool-call blocks, the tool calls).

    Call ids are derived from the text and position, so the same output always gets the same ids.
    """
    if "<tool_call>" not in text:
        return text, ()
    calls: list[ToolCall] = []
    kept: list[str] = []
    last = 0
    for match in _BLOCK.finditer(text):
        call = _to_call(match.group(1), len(calls), salt + text)
        if call is None:
            continue
        kept.append(text[last : match.start()])
        last = match.end()
        calls.append(call)
    kept.append(text[last:])
    return "".join(kept).strip() if calls else text, tuple(calls)


def _to_call(body: str, index: int, salt: str) -> ToolCall | None:
    try:
        value = json.loads(body)
    except json.JSONDecodeError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    args = value.get("arguments", value.get("parameters", {}))
    arguments = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    digest = hashlib.sha1(f"{salt}\x00{index}".encode()).hexdigest()[:20]
    return ToolCall(id=f"call_{digest}", name=value["name"], arguments=arguments)


def special_texts(tokenizer: Any) -> tuple[str, ...]:
    """The text of every special or added token (role markers, EOS, ``<tool_call>``...), longest first.

    A character-level model can spell ``<|user|>`` out of ordinary characters, and added tokens such as
    ``<tool_call>`` survive ``skip_special_tokens``; neither may reach a completion's text.
    """
    found = set(getattr(tokenizer, "all_special_tokens", ()) or ())
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    found.update(str(getattr(t, "content", t)) for t in decoder.values())
    found.update(("<tool_call>", "</tool_call>"))
    return tuple(sorted((t for t in found if t and t.strip()), key=len, reverse=True))


def strip_markers(text: str, markers: Sequence[str]) -> str:
    """``text`` without any of ``markers`` (applied until none is left, so removing one cannot join
    the pieces of another)."""
    if "<" not in text and "[" not in text:
        return text
    while True:
        before = text
        for marker in markers:
            text = text.replace(marker, "")
        if text == before:
            return text


def visible_prefix(text: str, markers: Sequence[str]) -> str:
    """What of a growing ``text`` can be shown now: markers removed, and a tail that could still grow
    into a marker (``<|us`` of ``<|user|>``) held back."""
    text = strip_markers(text, markers)
    start = text.rfind("<", max(0, len(text) - max((len(m) for m in markers), default=1)))
    if start >= 0 and any(m.startswith(text[start:]) for m in markers):
        return text[:start]
    return text
