"""A tiny model that runs the ``calc`` agent loop under greedy decoding, for the dialect tests.

The tiny model is overfit (seconds) to the two turns of one ``calc`` episode, as every dialect renders
them (they all become the same chat request): asked ``417*823=`` with the ``calc`` tool it calls
``calc(expr="417*823")``; given the tool's ``343191`` it answers ``343191``. The tool is offered with
the schema the OpenAI Agents SDK's ``function_tool(calc)`` sends, so the Responses API, the Agents SDK
and Anthropic Messages all meet the prompts it learned.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from verigym.envs.builtin.calc import calc

__all__ = [
    "ANSWER",
    "ARGS",
    "INSTRUCTIONS",
    "QUESTION",
    "anthropic_tool",
    "calc",
    "calc_model_dir",
    "chat_tool",
    "responses_tool",
    "turn_messages",
]

INSTRUCTIONS = "Use the calc tool."
QUESTION = "417*823="
ARGS = '{"expr": "417*823"}'
ANSWER = calc("417*823")  # "343191"
DESCRIPTION = 'Evaluate an integer expression with + - * (e.g. "417*823"); returns the integer.'
SCHEMA: dict[str, Any] = {
    "properties": {"expr": {"title": "Expr", "type": "string"}},
    "required": ["expr"],
    "title": "calc_args",
    "type": "object",
    "additionalProperties": False,
}


def chat_tool() -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": "calc", "description": DESCRIPTION, "parameters": SCHEMA, "strict": True},
    }


def responses_tool() -> dict[str, Any]:
    return {
        "type": "function",
        "name": "calc",
        "description": DESCRIPTION,
        "parameters": SCHEMA,
        "strict": True,
    }


def anthropic_tool() -> dict[str, Any]:
    return {"name": "calc", "description": DESCRIPTION, "input_schema": SCHEMA, "strict": True}


def turn_messages(second: bool) -> list[dict[str, Any]]:
    """The chat messages of the episode's first turn, or of its second (after the call and result)."""
    first = [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": QUESTION}]
    if not second:
        return first
    call = {"id": "call_1", "type": "function", "function": {"name": "calc", "arguments": ARGS}}
    return [
        *first,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": ANSWER},
    ]


_BUILT: dict[Path, Path] = {}


def calc_model_dir(tiny_dir: Path, factory: pytest.TempPathFactory) -> Path:
    """The overfit model's directory (built once per session and ``tiny_dir``)."""
    if tiny_dir in _BUILT:
        return _BUILT[tiny_dir]
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from verigym.policies.local.chat import encode_chat

    tok = AutoTokenizer.from_pretrained(tiny_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_dir)
    replies = [f'<tool_call>{{"name": "calc", "arguments": {ARGS}}}</tool_call>', ANSWER]
    pairs = []
    for second, reply in zip((False, True), replies, strict=True):
        prompt = encode_chat(tok, turn_messages(second), [chat_tool()])
        pairs.append((prompt, tok(reply, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]))
    width = max(len(p) + len(t) for p, t in pairs)
    ids = torch.tensor([p + t + [tok.eos_token_id] * (width - len(p) - len(t)) for p, t in pairs])
    labels = torch.tensor([[-100] * len(p) + t + [-100] * (width - len(p) - len(t)) for p, t in pairs])
    mask = torch.tensor([[1] * (len(p) + len(t)) + [0] * (width - len(p) - len(t)) for p, t in pairs])
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(800):
        out = model(ids, attention_mask=mask, labels=labels)
        if out.loss.item() < 0.02:
            break
        out.loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval()
    with torch.no_grad():
        logits = model(ids, attention_mask=mask).logits
    for row, (prompt, target) in enumerate(pairs):
        got = logits[row, len(prompt) - 1 : len(prompt) + len(target) - 1].argmax(-1).tolist()
        assert got == target, "the calc model did not learn its episode"
    out_dir = factory.mktemp("calcmodel") / "model"
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    _BUILT[tiny_dir] = out_dir
    return out_dir
