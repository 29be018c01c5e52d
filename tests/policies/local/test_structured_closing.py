"""Budget-aware closing of structured outputs (``policies.local._closing``): a constrained row that nears
its ``max_tokens`` is steered to finish its JSON or tool call in the tokens it has left; the logprobs it
records are those of the narrowed distribution; a row that cannot close says ``length``; rows without a
grammar in the same pass are untouched."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import torch

from verigym.policies.local import LocalPolicy
from verigym.types import Completion, Message, Sampling

ASK = [Message(role="user", content="12+34=")]
SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}, "sure": {"type": "boolean"}},
    "required": ["answer", "sure"],
    "additionalProperties": False,
}
FMT = {"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}}
SHORTEST = '{"answer": 0, "sure": true}'  # 27 characters: 27 tokens of the character-level tiny model
CALC = {
    "type": "function",
    "function": {
        "name": "calc",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    },
}
SEEDS = list(range(16))


@pytest.fixture(scope="module")
def policy(tiny_dir: Path) -> LocalPolicy:
    return LocalPolicy.from_pretrained(tiny_dir, device="cpu")


def _json(policy: LocalPolicy, max_tokens: int, **kw: Any) -> list[Completion]:
    sampling = Sampling(temperature=1.0, max_tokens=max_tokens, response_format=FMT, **kw)
    return policy.generate([ASK] * len(SEEDS), sampling, seeds=SEEDS)


def test_json_closes_within_a_small_budget(policy: LocalPolicy) -> None:
    roomy = _json(policy, 200)
    assert max(len(o.completion_token_ids or ()) for o in roomy) > 32  # left alone, some replies run longer
    for out in _json(policy, 32):
        assert out.finish_reason == "stop", out
        assert len(out.completion_token_ids or ()) <= 32
        jsonschema.validate(json.loads(out.text), SCHEMA)
        assert out.constrained == "json_schema"


def test_a_budget_of_exactly_the_shortest_reply_is_enough(policy: LocalPolicy) -> None:
    """With ``max_tokens`` = the shortest valid reply + the end token, every reply is that short: one
    digit, and ``true`` (``false`` is one token too long), sampled with probability 1 (logprob 0)."""
    outs = _json(policy, len(SHORTEST) + 1)
    for out in outs:
        assert out.finish_reason == "stop", out
        assert re.fullmatch(r'\{"answer": \d, "sure": true\}', out.text), out.text
        t = out.text.index("true")  # the character-level tokenizer: position = token index
        assert out.logprobs is not None and out.logprobs[t] == 0.0
    roomy = _json(policy, 200)  # with room, the model's own choice between true and false
    chosen = [o.logprobs[o.text.index("true") if "true" in o.text else o.text.index("false")] for o in roomy]  # type: ignore[index]
    assert any(lp < 0.0 for lp in chosen)


def test_a_forced_call_closes_within_a_small_budget(policy: LocalPolicy) -> None:
    def run(max_tokens: int) -> list[Completion]:
        sampling = Sampling(
            temperature=1.0, max_tokens=max_tokens, tool_choice="required", parallel_tool_calls=False
        )
        return policy.generate([ASK] * len(SEEDS), sampling, tools=[CALC], seeds=SEEDS)

    assert max(len(o.completion_token_ids or ()) for o in run(600)) > 60
    for out in run(60):
        assert out.finish_reason == "tool_calls", out
        assert [c.name for c in out.tool_calls] == ["calc"]
        jsonschema.validate(json.loads(out.tool_calls[0].arguments), CALC["function"]["parameters"])  # type: ignore[index]


def test_a_reply_that_cannot_close_says_length(policy: LocalPolicy) -> None:
    for out in _json(policy, 20):
        assert out.finish_reason == "length"
        assert out.constrained == "json_schema"
        assert len(out.completion_token_ids or ()) == 20
        assert not out.text.endswith("}")


def test_closing_leaves_free_rows_in_the_pass_alone(policy: LocalPolicy) -> None:
    async def both() -> tuple[list[Completion], list[Completion]]:
        free = policy.complete_n(ASK, sampling=Sampling(n=4, seed=11, max_tokens=40))
        forced = policy.complete_n(ASK, sampling=Sampling(n=4, seed=50, max_tokens=30, response_format=FMT))
        a, b = await asyncio.gather(free, forced)
        return list(a), list(b)

    passes = policy.passes
    mixed_free, mixed_forced = asyncio.run(both())
    assert policy.passes == passes + 1  # one pass held both requests
    for c in mixed_forced:
        assert c.finish_reason == "stop"
        jsonschema.validate(json.loads(c.text), SCHEMA)
    alone = asyncio.run(policy.complete_n(ASK, sampling=Sampling(n=4, seed=11, max_tokens=40)))
    for a, m in zip(alone, mixed_free, strict=True):
        assert a.completion_token_ids == m.completion_token_ids
        assert a.logprobs == pytest.approx(m.logprobs, abs=1e-5)  # batch sizes round differently


def test_restrict_keeps_only_what_still_closes(policy: LocalPolicy) -> None:
    """One row's narrowing, directly: with 6 tokens left after ``"sure": `` only ``t`` fits (``true}``
    and the end token), with 7 ``f`` does too; far from the budget nothing is narrowed."""
    constraint = policy.constraint(Sampling(response_format=FMT))
    assert constraint is not None and constraint.closer is not None
    closer, vocab = constraint.closer, policy.grammars.vocab_size
    matcher = constraint.matcher()
    assert matcher.accept_string('{"answer": 12, "sure": ')
    tok = {c: policy.tokenizer.convert_tokens_to_ids(c) for c in "tf"}

    def allowed(left: int) -> set[int]:
        logits = torch.full((vocab,), float("-inf"))
        logits[[tok["t"], tok["f"]]] = 0.0  # the grammar's mask: a boolean starts with t or f
        closer.restrict(logits, matcher, left, margin=8)
        return set(torch.isfinite(logits).nonzero().flatten().tolist())

    assert allowed(6) == {tok["t"]}
    assert allowed(7) == {tok["t"], tok["f"]}
    assert allowed(100) == {tok["t"], tok["f"]}
