"""Malformed parts of an OpenAI response (issue 14): a required part that is wrong is a retryable
``bad_response`` error naming the field; an optional part that is wrong (``usage``,
``choices[i].logprobs``) is ignored and flagged in ``Completion.malformed``, keeping the answer."""

from __future__ import annotations

from typing import Any

import pytest

from verigym.policies._openai_wire import parse_response
from verigym.policies.base import PolicyError


def body(**choice: Any) -> dict[str, Any]:
    base = {"index": 0, "message": {"role": "assistant", "content": "42"}, "finish_reason": "stop"}
    return {"choices": [{**base, **choice}], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}


@pytest.mark.parametrize("usage", ["lots", 7, ["x"], {"prompt_tokens": "3"}, {"completion_tokens": -1}])
def test_malformed_usage_keeps_the_answer_and_is_flagged(usage: Any) -> None:
    (c,) = parse_response({**body(), "usage": usage}, model="m", n=1)
    assert c.text == "42"
    assert c.malformed == ("usage",)
    assert c.usage.prompt_tokens == 0


@pytest.mark.parametrize("logprobs", ["oops", 3, {"content": "x"}, {"content": [{"token": "4"}]}])
def test_malformed_logprobs_keep_the_answer_and_are_flagged(logprobs: Any) -> None:
    (c,) = parse_response(body(logprobs=logprobs), model="m", n=1)
    assert c.text == "42"
    assert c.logprobs is None
    assert c.malformed == ("choices[0].logprobs",)


def test_well_formed_response_has_no_flag() -> None:
    lp = {"content": [{"token": "42", "logprob": -0.5, "top_logprobs": []}]}
    (c,) = parse_response(body(logprobs=lp), model="m", n=1)
    assert c.malformed == () and c.logprobs == (-0.5,)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"choices": ["x"]}, "choices"),
        (body(message="hi"), "choices[0].message"),
        (body(message={"role": "assistant", "content": {"a": 1}}), "choices[0].message.content"),
        (
            body(message={"role": "assistant", "content": None, "tool_calls": "call"}),
            "choices[0].message.tool_calls",
        ),
    ],
)
def test_malformed_required_part_is_a_retryable_error_naming_it(data: dict[str, Any], field: str) -> None:
    with pytest.raises(PolicyError) as info:
        parse_response(data, model="m", n=1)
    assert info.value.kind == "bad_response" and info.value.retryable
    assert f"'{field}'" in str(info.value)
