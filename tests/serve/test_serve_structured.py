"""``verigym serve`` with the official ``openai`` client: ``tool_choice`` (required, named, none) and
``response_format`` (json_object, json_schema) are enforced, streamed and not; a field the server does
not honour is a 400 naming it, never silently ignored."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import openai
import pytest

from verigym.policies.local import LocalPolicy
from verigym.serve import RunningServer

USER = [{"role": "user", "content": "What is 12+34? Use the calculator."}]
CALC = {
    "type": "function",
    "function": {
        "name": "calc",
        "description": "Evaluate an arithmetic expression",
        "parameters": {
            "type": "object",
            "properties": {
                "a": {"type": "integer"},
                "op": {"enum": ["+", "-", "*"]},
                "b": {"type": "integer"},
            },
            "required": ["a", "op", "b"],
            "additionalProperties": False,
        },
    },
}
NOTE = {
    "type": "function",
    "function": {
        "name": "note",
        "parameters": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
    },
}
SCHEMA = {
    "type": "object",
    "properties": {"sum": {"type": "integer"}, "unit": {"enum": ["apples", "pears"]}},
    "required": ["sum", "unit"],
    "additionalProperties": False,
}


@pytest.fixture(scope="module")
def client(tiny_dir: Path) -> Iterator[openai.OpenAI]:
    policy = LocalPolicy.from_pretrained(tiny_dir, device="cpu")
    with RunningServer(policy, name="tiny") as srv:
        yield openai.OpenAI(base_url=srv.url, api_key="none", max_retries=0)


def _params(call: Any) -> dict[str, Any]:
    return {"calc": CALC, "note": NOTE}[call.function.name]["function"]["parameters"]  # type: ignore[index,return-value]


def test_required_always_calls_a_tool(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model="tiny", messages=USER, tools=[CALC, NOTE], tool_choice="required", n=8, seed=1, max_tokens=600
    )  # type: ignore[call-overload]
    for choice in r.choices:
        assert choice.finish_reason == "tool_calls", choice
        assert choice.message.tool_calls
        for call in choice.message.tool_calls:
            jsonschema.validate(json.loads(call.function.arguments), _params(call))  # type: ignore[union-attr]


def test_named_choice_calls_that_tool_once(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model="tiny",
        messages=USER,
        tools=[CALC, NOTE],
        tool_choice={"type": "function", "function": {"name": "calc"}},
        parallel_tool_calls=False,
        n=6,
        seed=2,
        max_tokens=300,
    )
    for choice in r.choices:
        calls = choice.message.tool_calls or []
        assert [c.function.name for c in calls] == ["calc"], choice  # type: ignore[union-attr]


def test_none_never_parses_a_call(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model="tiny", messages=USER, tools=[CALC], tool_choice="none", max_tokens=30, seed=3
    )
    assert r.choices[0].message.tool_calls is None
    assert r.choices[0].finish_reason in ("stop", "length")


def test_json_schema_always_validates_streamed_and_not(client: openai.OpenAI) -> None:
    fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True}}
    r = client.chat.completions.create(
        model="tiny", messages=USER, response_format=fmt, n=8, seed=4, max_tokens=200
    )  # type: ignore[arg-type]
    for choice in r.choices:
        assert choice.finish_reason == "stop"
        jsonschema.validate(json.loads(choice.message.content or ""), SCHEMA)
    stream = client.chat.completions.create(
        model="tiny", messages=USER, response_format=fmt, seed=4, max_tokens=200, stream=True
    )  # type: ignore[arg-type]
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == r.choices[0].message.content  # seed 4 is the first of n's seeds


def test_streamed_required_call_arrives_as_tool_call_deltas(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model="tiny", messages=USER, tools=[NOTE], tool_choice="required", seed=5, max_tokens=300, stream=True
    )
    chunks = [c for c in stream if c.choices]
    calls = [t for c in chunks for t in (c.choices[0].delta.tool_calls or [])]
    assert calls and calls[0].function is not None and calls[0].function.name == "note"
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_json_object(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model="tiny", messages=USER, response_format={"type": "json_object"}, n=4, seed=6, max_tokens=300
    )
    finished = [c for c in r.choices if c.finish_reason == "stop"]
    assert finished
    for choice in finished:
        assert isinstance(json.loads(choice.message.content or ""), dict)


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"logit_bias": {"5": 10}}, "logit_bias"),
        ({"frequency_penalty": 0.5}, "frequency_penalty"),
        ({"reasoning_effort": "high"}, "reasoning_effort"),
        ({"functions": [CALC["function"]]}, "functions"),
        ({"store": True}, "store"),
        ({"tool_choice": "required"}, "tool_choice"),  # no tools
        ({"tools": [CALC], "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
        ({"response_format": {"type": "xml"}}, "response_format"),
        (
            {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 3}}}},
            "response_format.json_schema.schema",
        ),
    ],
)
def test_a_field_not_honoured_is_a_400_naming_it(
    client: openai.OpenAI, extra: dict[str, Any], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="tiny", messages=USER, max_tokens=4, extra_body=extra)
    assert err.value.status_code == 400
    assert (err.value.body or {}).get("param") == param, err.value.body  # type: ignore[union-attr]


def test_harmless_fields_are_accepted(client: openai.OpenAI) -> None:
    r = client.chat.completions.create(
        model="tiny",
        messages=USER,
        max_tokens=4,
        user="u1",
        metadata={"run": "x"},
        store=False,
        frequency_penalty=0,
        presence_penalty=0.0,
        extra_body={"return_token_ids": True},
    )
    assert r.choices[0].message is not None
