"""``POST /v1/messages`` and ``/v1/messages/count_tokens`` against the official ``anthropic`` SDK: text
and system with token ids as the chat path gives them, stop sequences, a ``calc`` agent loop with
``tool_use``/``tool_result`` blocks (``messages.create`` and ``messages.stream``), Anthropic's stream
events, count_tokens, logprobs as an extension, and a 400 in Anthropic's shape naming each field that
cannot be served."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest
from calc_model import (
    ANSWER,
    ARGS,
    INSTRUCTIONS,
    QUESTION,
    anthropic_tool,
    calc,
    calc_model_dir,
    chat_tool,
    turn_messages,
)

from verigym.policies.local import LocalPolicy
from verigym.serve import RunningServer

GREEDY = {"temperature": 0}  # not a keyword of this SDK's messages.create: sent in the body


@pytest.fixture(scope="module")
def tiny_url(tiny_dir: Path) -> Iterator[str]:
    with RunningServer(LocalPolicy.from_pretrained(tiny_dir, device="cpu"), name="tiny") as srv:
        yield srv.url


@pytest.fixture(scope="module")
def calc_url(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    policy = LocalPolicy.from_pretrained(calc_model_dir(tiny_dir, tmp_path_factory), device="cpu")
    with RunningServer(policy, name="calc") as srv:
        yield srv.url


def _client(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url.removesuffix("/v1"), api_key="none", max_retries=0)


def test_text_and_system_match_the_chat_path(tiny_url: str) -> None:
    client = _client(tiny_url)
    m = client.messages.create(
        model="tiny",
        max_tokens=12,
        system="Be brief.",
        messages=[{"role": "user", "content": "12+34="}],
        metadata={"user_id": "u1"},
        extra_body={**GREEDY, "logprobs": True, "top_logprobs": 2},
    )
    chat = httpx.post(
        f"{tiny_url}/chat/completions",
        json={
            "model": "tiny",
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "12+34="}],
            "max_tokens": 12,
            "temperature": 0,
        },
        timeout=60,
    ).json()
    extra = m.model_extra or {}
    assert extra["prompt_token_ids"] == chat["prompt_token_ids"]
    assert extra["token_ids"] == chat["choices"][0]["token_ids"]
    assert "".join(b.text for b in m.content if b.type == "text") == chat["choices"][0]["message"]["content"]
    assert m.stop_reason == {"length": "max_tokens", "stop": "end_turn"}[chat["choices"][0]["finish_reason"]]
    assert m.usage.input_tokens == len(extra["prompt_token_ids"])
    assert m.usage.output_tokens == len(extra["token_ids"])
    assert len(extra["logprobs"]["content"]) == len(extra["token_ids"])
    assert all(len(t["top_logprobs"]) == 2 for t in extra["logprobs"]["content"])
    count = client.messages.count_tokens(
        model="tiny", system="Be brief.", messages=[{"role": "user", "content": "12+34="}]
    )
    assert count.input_tokens == m.usage.input_tokens


def _loop(
    client: anthropic.Anthropic, stream: bool, **extra: Any
) -> tuple[list[Any], anthropic.types.Message]:
    """The calc episode through the SDK: tool_use, run the tool, tool_result back, read the answer."""
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    args: dict[str, Any] = {
        "model": "calc",
        "max_tokens": 60,
        "system": INSTRUCTIONS,
        "tools": [anthropic_tool()],
        "extra_body": GREEDY,
        **extra,
    }
    for _ in range(3):
        if stream:
            with client.messages.stream(messages=messages, **args) as s:
                m = s.get_final_message()
        else:
            m = client.messages.create(messages=messages, **args)
        uses = [b for b in m.content if b.type == "tool_use"]
        if m.stop_reason != "tool_use":
            return messages, m
        messages.append({"role": "assistant", "content": m.content})
        results = [{"type": "tool_result", "tool_use_id": u.id, "content": calc(**u.input)} for u in uses]  # type: ignore[arg-type]
        messages.append({"role": "user", "content": results})
    raise AssertionError("the loop did not end")


@pytest.mark.parametrize("stream", [False, True])
def test_a_calc_agent_loop_with_tool_use_and_tool_result(calc_url: str, stream: bool) -> None:
    client = _client(calc_url)
    messages, last = _loop(client, stream)
    assert [b.type for b in last.content] == ["text"] and last.content[0].text == ANSWER  # type: ignore[union-attr]
    assert last.stop_reason == "end_turn"
    use = messages[1]["content"][0]
    assert use.type == "tool_use" and use.name == "calc" and use.input == {"expr": "417*823"}
    assert messages[2]["content"][0]["tool_use_id"] == use.id and use.id.startswith("call_")
    count = client.messages.count_tokens(
        model="calc", system=INSTRUCTIONS, messages=messages, tools=[anthropic_tool()]
    )
    full = client.messages.create(
        model="calc", max_tokens=60, system=INSTRUCTIONS, messages=messages, tools=[anthropic_tool()]
    )
    assert count.input_tokens == len((full.model_extra or {})["prompt_token_ids"])


def test_the_stream_sends_anthropic_events(calc_url: str) -> None:
    client = _client(calc_url)
    args: dict[str, Any] = {
        "model": "calc",
        "max_tokens": 60,
        "system": INSTRUCTIONS,
        "messages": [{"role": "user", "content": QUESTION}],
        "tools": [anthropic_tool()],
        "extra_body": GREEDY,
    }
    whole = client.messages.create(**args)
    events = list(client.messages.create(stream=True, **args))
    assert [e.type for e in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    start, delta = events[1], events[2]
    assert start.content_block.type == "tool_use" and start.content_block.name == "calc"  # type: ignore[union-attr]
    assert delta.delta.type == "input_json_delta" and delta.delta.partial_json == ARGS  # type: ignore[union-attr]
    assert events[4].delta.stop_reason == "tool_use"  # type: ignore[union-attr]
    assert (events[4].model_extra or {})["token_ids"] == (whole.model_extra or {})["token_ids"]
    assert (events[4].model_extra or {})["prompt_token_ids"] == (whole.model_extra or {})["prompt_token_ids"]
    raw = httpx.post(
        f"{calc_url.removesuffix('/v1')}/v1/messages",
        json={**args.pop("extra_body"), **args, "stream": True},
        timeout=60,
    )
    assert "event: ping\n" in raw.text and raw.text.startswith("event: message_start\n")


def test_the_prompt_is_the_chat_prompt_turn_after_turn(calc_url: str) -> None:
    second = [
        {"role": "user", "content": QUESTION},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "call_1", "name": "calc", "input": {"expr": "417*823"}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": ANSWER}]},
    ]
    for turn, messages in ((False, second[:1]), (True, second)):
        chat = httpx.post(
            f"{calc_url}/chat/completions",
            json={"model": "calc", "messages": turn_messages(turn), "tools": [chat_tool()], "max_tokens": 1},
            timeout=60,
        ).json()
        body = {
            "model": "calc",
            "system": INSTRUCTIONS,
            "messages": messages,
            "tools": [anthropic_tool()],
            "max_tokens": 1,
        }
        got = httpx.post(f"{calc_url}/messages", json=body, timeout=60).json()
        assert got["prompt_token_ids"] == chat["prompt_token_ids"]


def test_stop_sequences_stop_and_are_reported(calc_url: str) -> None:
    messages, _ = _loop(_client(calc_url), False)
    m = _client(calc_url).messages.create(
        model="calc",
        max_tokens=60,
        system=INSTRUCTIONS,
        messages=messages,
        tools=[anthropic_tool()],
        stop_sequences=["19", "3431"],
        extra_body=GREEDY,
    )
    assert m.stop_reason == "stop_sequence" and m.stop_sequence == "3431"
    assert m.content == [] or m.content[0].text == ""  # type: ignore[union-attr]


REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"thinking": {"type": "enabled", "budget_tokens": 2000}}, "thinking"),
    (
        {
            "messages": [
                {"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "x"}}]}
            ]
        },
        "messages[0].content[0].type",
    ),
    (
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "The"}]},
        "messages[1]",
    ),
    ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools[0].type"),
    ({"tools": [{**anthropic_tool(), "input_examples": [{}]}]}, "tools[0].input_examples"),
    ({"output_config": {"effort": "low"}}, "output_config.effort"),
    ({"container": "c1"}, "container"),
    ({"speed": "fast"}, "speed"),
    ({"top_k": 0}, "top_k"),
    ({"temperature": 1.5}, "temperature"),
    ({"frequency_penalty": 0.5}, "frequency_penalty"),
    ({"tool_choice": {"type": "something"}}, "tool_choice.type"),
]


@pytest.mark.parametrize(("extra", "field"), REFUSED, ids=[f for _, f in REFUSED])
def test_a_field_that_cannot_be_served_is_a_400_naming_it(
    tiny_url: str, extra: dict[str, Any], field: str
) -> None:
    body = {"model": "tiny", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}], **extra}
    r = httpx.post(f"{tiny_url}/messages", json=body, timeout=60)
    assert r.status_code == 400, r.text
    error = r.json()
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert error["error"]["message"].startswith(f"{field}:"), error


def test_harmless_fields_are_accepted_and_errors_are_anthropic_shaped(tiny_url: str) -> None:
    client = _client(tiny_url)
    m = client.messages.create(
        model="tiny",
        max_tokens=2,
        messages=[
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
            }
        ],
        system=[{"type": "text", "text": "Be brief."}],
        metadata={"user_id": "u1"},
        service_tier="auto",
        thinking={"type": "disabled"},
        speed="standard",
        extra_body={"top_k": 5, "top_p": 0.9, "seed": 1},
    )
    assert m.usage.service_tier == "standard"
    with pytest.raises(anthropic.NotFoundError) as caught:
        client.messages.create(model="nope", max_tokens=2, messages=[{"role": "user", "content": "hi"}])
    assert caught.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.messages.create(
            model="tiny",
            max_tokens=2,
            messages=[{"role": "user", "content": "hi"}],
            thinking={"type": "enabled", "budget_tokens": 2000},
        )
    assert refused.value.body["error"]["message"].startswith("thinking:")  # type: ignore[index]
    r = httpx.post(f"{tiny_url}/messages", content=b"{not json", timeout=60)
    assert r.status_code == 400 and r.json()["type"] == "error"


# Forced tool use and output_config.format are enforced by the chat path's grammar-constrained decoding
# (``policies.local._grammar``); these check that the Messages fields reach it, on the random model.
@pytest.mark.parametrize("choice", [{"type": "any"}, {"type": "tool", "name": "calc"}], ids=["any", "tool"])
def test_tool_choice_forces_tool_use(tiny_url: str, choice: dict[str, Any]) -> None:
    schema = {
        "type": "object",
        "properties": {"expr": {"type": "string", "enum": ["417*823"]}},
        "required": ["expr"],
        "additionalProperties": False,
    }
    m = _client(tiny_url).messages.create(
        model="tiny",
        max_tokens=200,
        messages=[{"role": "user", "content": QUESTION}],
        tools=[{"name": "calc", "input_schema": schema}],
        tool_choice={**choice, "disable_parallel_tool_use": True},  # type: ignore[arg-type]
        extra_body=GREEDY,
    )
    assert m.stop_reason == "tool_use" and [b.type for b in m.content] == ["tool_use"]
    assert m.content[0].input == {"expr": "417*823"}  # type: ignore[union-attr]


def test_output_config_format_is_followed(tiny_url: str) -> None:
    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    }
    m = _client(tiny_url).messages.create(
        model="tiny",
        max_tokens=40,
        messages=[{"role": "user", "content": "hi"}],
        output_config={"format": {"type": "json_schema", "schema": schema}},
        extra_body=GREEDY,
    )
    assert isinstance(json.loads(m.content[0].text)["ok"], bool)  # type: ignore[union-attr]
