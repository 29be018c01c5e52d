"""Structured outputs in the local engine: ``response_format`` and forcing ``tool_choice`` enforced by a
grammar (``policies.local._grammar``) inside the batched decode loop, with logprobs of the constrained
distribution, constrained and free rows mixed in one pass, and clear errors for what cannot be enforced."""

from __future__ import annotations

import json
import math
from pathlib import Path

import jsonschema
import pytest

from verigym.policies.base import PolicyError
from verigym.policies.local import LocalPolicy
from verigym.types import Message, Sampling

ASK = [Message(role="user", content="12+34=")]
SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "integer"}, "sure": {"type": "boolean"}},
    "required": ["answer", "sure"],
    "additionalProperties": False,
}
CALC = {
    "type": "function",
    "function": {
        "name": "calc",
        "description": "add two numbers",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    },
}
ECHO = {
    "type": "function",
    "function": {
        "name": "echo",
        "parameters": {"type": "object", "properties": {"flag": {"type": "boolean"}}, "required": ["flag"]},
    },
}


@pytest.fixture(scope="module")
def policy(tiny_dir: Path) -> LocalPolicy:
    return LocalPolicy.from_pretrained(tiny_dir, device="cpu")


def _sampling(**kw: object) -> Sampling:
    return Sampling(**{"temperature": 1.0, "max_tokens": 200, **kw})  # type: ignore[arg-type]


def test_json_schema_always_validates(policy: LocalPolicy) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA, "strict": True}}
    outs = policy.generate([ASK] * 12, _sampling(response_format=fmt), seeds=list(range(12)))
    for out in outs:
        assert out.finish_reason == "stop", out
        jsonschema.validate(json.loads(out.text), SCHEMA)
        assert out.constrained == "json_schema"
    free = policy.generate([ASK] * 12, _sampling(), seeds=list(range(12)))
    assert sum(_is_json(o.text) for o in free) == 0  # the random tiny model never writes JSON by itself


def test_json_object_is_an_object(policy: LocalPolicy) -> None:
    outs = policy.generate(
        [ASK] * 6, _sampling(response_format={"type": "json_object"}), seeds=list(range(6))
    )
    for out in outs:
        if out.finish_reason == "stop":  # an open-ended object may run out of tokens: then "length"
            assert isinstance(json.loads(out.text), dict)
    assert sum(o.finish_reason == "stop" for o in outs) >= 1


def test_logprobs_are_of_the_constrained_distribution(policy: LocalPolicy) -> None:
    """The first character of a compact JSON object can only be ``{``: its constrained probability is 1,
    so its logprob is exactly 0 (log 1), and every logprob is that of a token the mask allowed."""
    out = policy.generate(
        [ASK], _sampling(response_format={"type": "json_object"}, top_logprobs=5), seeds=[3]
    )[0]
    first = policy.tokenizer.decode([out.completion_token_ids[0]])
    assert first == "{"
    assert out.logprobs is not None and out.logprobs[0] == 0.0
    assert out.top_logprobs is not None and out.top_logprobs[0][1] == -math.inf  # nothing else allowed
    free = policy.generate([ASK], _sampling(top_logprobs=5), seeds=[3])[0]
    assert free.logprobs is not None and free.logprobs[0] < 0.0


def test_constrained_and_free_rows_share_a_pass(policy: LocalPolicy) -> None:
    """A free row decoded beside constrained rows is the sample it is alone (the mask is per row)."""
    import asyncio

    fmt = {"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}}

    async def both() -> tuple[list[object], list[object]]:
        free = policy.complete_n(ASK, sampling=_sampling(n=3, seed=11, max_tokens=40))
        forced = policy.complete_n(ASK, sampling=_sampling(n=3, seed=50, response_format=fmt))
        a, b = await asyncio.gather(free, forced)
        return list(a), list(b)

    passes = policy.passes
    mixed_free, mixed_forced = asyncio.run(both())
    assert policy.passes == passes + 1  # one pass held both requests
    alone = asyncio.run(policy.complete_n(ASK, sampling=_sampling(n=3, seed=11, max_tokens=40)))
    assert [c.completion_token_ids for c in alone] == [c.completion_token_ids for c in mixed_free]  # type: ignore[attr-defined]
    assert all(c.constrained is None for c in alone)
    for c in mixed_forced:
        jsonschema.validate(json.loads(c.text), SCHEMA)  # type: ignore[attr-defined]


def test_required_tool_choice_always_calls_a_tool(policy: LocalPolicy) -> None:
    outs = policy.generate(
        [ASK] * 10,
        _sampling(tool_choice="required", max_tokens=600),
        tools=[CALC, ECHO],
        seeds=list(range(10)),
    )  # up to MAX_PARALLEL calls of ~100 characters each
    for out in outs:
        assert out.finish_reason == "tool_calls", out
        assert out.constrained == "tool_call"
        for call in out.tool_calls:
            tool = {"calc": CALC, "echo": ECHO}[call.name]
            jsonschema.validate(json.loads(call.arguments), tool["function"]["parameters"])  # type: ignore[index]


def test_named_tool_choice_and_one_call(policy: LocalPolicy) -> None:
    named = {"type": "function", "function": {"name": "echo"}}
    outs = policy.generate(
        [ASK] * 8,
        _sampling(tool_choice=named, parallel_tool_calls=False),
        tools=[CALC, ECHO],
        seeds=list(range(8)),
    )
    for out in outs:
        assert [c.name for c in out.tool_calls] == ["echo"], out


@pytest.mark.parametrize("fmt", ["smollm2", "llama3", "mistral", "hermes"])
def test_every_tool_format_parses_its_forced_call(tiny_dir: Path, fmt: str) -> None:
    policy = LocalPolicy.from_pretrained(tiny_dir, device="cpu", tool_format=fmt)
    one = _sampling(tool_choice="required", parallel_tool_calls=False)
    outs = policy.generate([ASK] * 3, one, tools=[ECHO], seeds=[0, 1, 2])
    for out in outs:
        assert out.tool_calls and all(c.name == "echo" for c in out.tool_calls), (fmt, out)


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"tool_choice": "required"}, "tool_choice"),  # no tools
        ({"tool_choice": {"type": "function", "function": {"name": "nope"}}, "tools": [CALC]}, "tool_choice"),
        ({"tool_choice": {"type": "allowed_tools"}, "tools": [CALC]}, "tool_choice"),
        ({"response_format": {"type": "yaml"}}, "response_format"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "wrong"}}}},
            "response_format.json_schema.schema",
        ),
        (
            {"response_format": {"type": "json_object"}, "tool_choice": "required", "tools": [CALC]},
            "response_format",
        ),
    ],
)
def test_what_cannot_be_enforced_is_refused(policy: LocalPolicy, kw: dict[str, object], field: str) -> None:
    tools = kw.pop("tools", None)
    with pytest.raises(PolicyError) as err:
        policy.generate([ASK], _sampling(**kw), tools=tools)  # type: ignore[arg-type]
    assert err.value.kind == "bad_request"
    assert str(err.value).startswith(field + ":"), str(err.value)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    return True
