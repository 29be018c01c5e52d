"""``POST /v1/responses`` against the official ``openai`` SDK and the OpenAI Agents SDK: text and
instructions, token ids and logprobs as the chat path gives them, the stream's events, a ``calc`` tool
round trip with ``function_call_output`` (streamed and not), an Agents SDK agent loop, and a 400
naming each field that cannot be served."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from calc_model import (
    ANSWER,
    ARGS,
    INSTRUCTIONS,
    QUESTION,
    calc,
    calc_model_dir,
    chat_tool,
    responses_tool,
    turn_messages,
)

from verigym.policies.local import LocalPolicy
from verigym.serve import RunningServer


@pytest.fixture(scope="module")
def tiny_url(tiny_dir: Path) -> Iterator[str]:
    with RunningServer(LocalPolicy.from_pretrained(tiny_dir, device="cpu"), name="tiny") as srv:
        yield srv.url


@pytest.fixture(scope="module")
def calc_url(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    policy = LocalPolicy.from_pretrained(calc_model_dir(tiny_dir, tmp_path_factory), device="cpu")
    with RunningServer(policy, name="calc") as srv:
        yield srv.url


def _client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key="none", max_retries=0)


def test_text_and_instructions_match_the_chat_path(tiny_url: str) -> None:
    client = _client(tiny_url)
    r = client.responses.create(
        model="tiny",
        input="12+34=",
        instructions="Be brief.",
        max_output_tokens=12,
        temperature=0,
        top_logprobs=2,
        include=["message.output_text.logprobs"],
        store=False,
        metadata={"run": "1"},
    )
    chat = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "12+34="}],
        max_tokens=12,
        temperature=0,
    )
    extra = r.model_extra or {}
    assert extra["prompt_token_ids"] == (chat.model_extra or {})["prompt_token_ids"]
    assert extra["token_ids"] == (chat.choices[0].model_extra or {})["token_ids"]
    assert r.output_text == chat.choices[0].message.content
    assert r.object == "response" and r.metadata == {"run": "1"} and r.instructions == "Be brief."
    assert r.usage is not None and r.usage.output_tokens == len(extra["token_ids"])
    assert r.usage.input_tokens == len(extra["prompt_token_ids"])
    assert r.status == ("incomplete" if chat.choices[0].finish_reason == "length" else "completed")
    part = r.output[0].content[0]  # type: ignore[union-attr]
    assert part.type == "output_text" and part.logprobs is not None
    assert len(part.logprobs) == len(extra["token_ids"]) == len(extra["logprobs"]["content"])
    assert all(len(t.top_logprobs) == 2 for t in part.logprobs)


def test_stream_sends_openai_events_and_the_same_reply(tiny_url: str) -> None:
    client = _client(tiny_url)
    args: dict[str, Any] = {"model": "tiny", "input": "12+34=", "max_output_tokens": 10, "temperature": 0}
    whole = client.responses.create(**args)
    events = list(client.responses.create(stream=True, **args))
    kinds = [e.type for e in events]
    assert kinds[:4] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert kinds[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        f"response.{whole.status}",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == whole.output_text
    final = events[-1].response  # type: ignore[union-attr]
    assert final.output_text == whole.output_text
    assert (final.model_extra or {})["token_ids"] == (whole.model_extra or {})["token_ids"]


def _run_loop(client: openai.OpenAI, stream: bool) -> tuple[list[Any], str]:
    """The calc episode through the SDK: call, run the tool, send the output back, read the answer."""
    items: list[Any] = [{"role": "user", "content": QUESTION}]
    args: dict[str, Any] = {
        "model": "calc",
        "instructions": INSTRUCTIONS,
        "tools": [responses_tool()],
        "temperature": 0,
        "max_output_tokens": 60,
    }
    for _ in range(3):
        if stream:
            with client.responses.stream(input=items, **args) as s:
                r = s.get_final_response()
        else:
            r = client.responses.create(input=items, **args)
        calls = [o for o in r.output if o.type == "function_call"]
        if not calls:
            return items, r.output_text
        items += [o.model_dump(exclude_none=True, exclude={"parsed_arguments"}) for o in r.output]
        for c in calls:
            output = calc(**json.loads(c.arguments))
            items.append({"type": "function_call_output", "call_id": c.call_id, "output": output})
    raise AssertionError("the loop did not end")


@pytest.mark.parametrize("stream", [False, True])
def test_a_calc_tool_round_trip_with_function_call_output(calc_url: str, stream: bool) -> None:
    client = _client(calc_url)
    items, answer = _run_loop(client, stream)
    assert answer == ANSWER
    call = next(i for i in items if i.get("type") == "function_call")
    assert call["name"] == "calc" and call["arguments"] == ARGS and call["call_id"].startswith("call_")
    out = next(i for i in items if i.get("type") == "function_call_output")
    assert out["call_id"] == call["call_id"]


def test_the_tool_call_streams_as_function_call_events(calc_url: str) -> None:
    client = _client(calc_url)
    events = list(
        client.responses.create(
            model="calc",
            input=QUESTION,
            instructions=INSTRUCTIONS,
            tools=[responses_tool()],
            temperature=0,
            stream=True,
        )
    )
    kinds = [e.type for e in events]
    assert "response.output_text.delta" not in kinds
    assert kinds[2:] == [
        "response.output_item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]
    done = events[-2].item  # type: ignore[union-attr]
    assert done.type == "function_call" and done.arguments == ARGS and done.status == "completed"


def test_both_dialect_turns_are_the_chat_prompts(calc_url: str) -> None:
    """The Responses translation renders exactly the chat request's prompt, turn after turn."""
    for second in (False, True):
        messages = turn_messages(second)
        chat = httpx.post(
            f"{calc_url}/chat/completions",
            json={"model": "calc", "messages": messages, "tools": [chat_tool()], "max_tokens": 1},
            timeout=60,
        ).json()
        items: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
        if second:
            items += [
                {"type": "function_call", "call_id": "call_1", "name": "calc", "arguments": ARGS},
                {"type": "function_call_output", "call_id": "call_1", "output": ANSWER},
            ]
        body = {
            "model": "calc",
            "instructions": INSTRUCTIONS,
            "input": items,
            "tools": [responses_tool()],
            "max_output_tokens": 1,
        }
        r = httpx.post(f"{calc_url}/responses", json=body, timeout=60).json()
        assert r["prompt_token_ids"] == chat["prompt_token_ids"]


async def test_the_agents_sdk_runs_the_calc_loop(calc_url: str) -> None:
    from agents import (
        Agent,
        ModelSettings,
        Runner,
        function_tool,
        set_default_openai_client,
        set_tracing_disabled,
    )
    from agents.items import ToolCallItem, ToolCallOutputItem

    set_tracing_disabled(True)
    set_default_openai_client(
        openai.AsyncOpenAI(base_url=calc_url, api_key="none", max_retries=0), use_for_tracing=False
    )
    agent = Agent(
        name="calc",
        instructions=INSTRUCTIONS,
        tools=[function_tool(calc)],
        model="calc",  # the default provider: OpenAIResponsesModel, i.e. /v1/responses
        model_settings=ModelSettings(temperature=0),
    )
    result = await Runner.run(agent, QUESTION, max_turns=4)
    assert result.final_output == ANSWER
    assert [type(i) for i in result.new_items][:2] == [ToolCallItem, ToolCallOutputItem]
    assert result.new_items[1].output == ANSWER  # type: ignore[union-attr]

    run = Runner.run_streamed(agent, QUESTION, max_turns=4)  # its streamed mode too
    async for _ in run.stream_events():
        pass
    assert run.final_output == ANSWER


REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"previous_response_id": "resp_1"}, "previous_response_id"),
    ({"conversation": "conv_1"}, "conversation"),
    ({"reasoning": {"effort": "high"}}, "reasoning"),
    ({"background": True}, "background"),
    ({"include": ["file_search_call.results"]}, "include[0]"),
    ({"truncation": "auto"}, "truncation"),
    ({"max_tool_calls": 2}, "max_tool_calls"),
    ({"prompt": {"id": "pmpt_1"}}, "prompt"),
    ({"text": {"verbosity": "low"}}, "text.verbosity"),
    ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"tools": [{**responses_tool(), "defer_loading": True}]}, "tools[0].defer_loading"),
    ({"tool_choice": {"type": "allowed_tools", "mode": "auto", "tools": []}}, "tool_choice"),
    ({"stream_options": {"include_obfuscation": True}}, "stream_options.include_obfuscation"),
    ({"frequency_penalty": 0.5}, "frequency_penalty"),
    (
        {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
        "input[0].content[0]",
    ),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type"),
    ({"input": [{"type": "reasoning", "id": "rs_1", "summary": []}]}, "input[0].type"),
    ({"max_output_tokens": 0}, "max_output_tokens"),
]


@pytest.mark.parametrize(("extra", "param"), REFUSED, ids=[p for _, p in REFUSED])
def test_a_field_that_cannot_be_served_is_a_400_naming_it(
    tiny_url: str, extra: dict[str, Any], param: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        _client(tiny_url).responses.create(model="tiny", input="hi", max_output_tokens=2, extra_body=extra)
    body = caught.value.body
    assert isinstance(body, dict) and body["param"] == param, body
    assert param.split("[")[0].split(".")[0] in body["message"]


def test_harmless_fields_are_accepted(tiny_url: str) -> None:
    r = _client(tiny_url).responses.create(
        model="tiny",
        input="hi",
        max_output_tokens=2,
        store=True,
        user="u1",
        safety_identifier="s1",
        prompt_cache_key="k1",
        service_tier="auto",
        truncation="disabled",
        background=False,
        include=["reasoning.encrypted_content"],
        parallel_tool_calls=True,
        extra_body={"seed": 3, "top_k": 5},
    )
    assert r.status in ("completed", "incomplete") and r.prompt_cache_key == "k1" and r.user == "u1"
    unknown = _client(tiny_url).models.list()  # the server is still well
    assert [m.id for m in unknown.data] == ["tiny"]


# Forced tool calls and JSON schemas are enforced by the chat path's grammar-constrained decoding
# (``policies.local._grammar``); these check that the Responses fields reach it, on the random model.
ENUM_SCHEMA = {
    "type": "object",
    "properties": {"expr": {"type": "string", "enum": ["417*823"]}},
    "required": ["expr"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    "choice", ["required", {"type": "function", "name": "calc"}], ids=["required", "named"]
)
def test_tool_choice_forces_the_call(tiny_url: str, choice: Any) -> None:
    tool = {"type": "function", "name": "calc", "parameters": ENUM_SCHEMA, "strict": True}
    args: dict[str, Any] = {"model": "tiny", "input": QUESTION, "tools": [tool], "tool_choice": choice}
    r = _client(tiny_url).responses.create(
        max_output_tokens=200, temperature=0, parallel_tool_calls=False, **args
    )
    assert [(o.type, getattr(o, "arguments", None)) for o in r.output] == [("function_call", ARGS)]
    events = list(
        _client(tiny_url).responses.create(
            max_output_tokens=200, temperature=0, parallel_tool_calls=False, stream=True, **args
        )
    )
    assert events[-1].type == "response.completed" and events[-1].response.output[0].type == "function_call"  # type: ignore[union-attr]


def test_text_format_json_schema_is_followed(tiny_url: str) -> None:
    schema = {
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": False,
    }
    r = _client(tiny_url).responses.create(
        model="tiny",
        input="hi",
        text={"format": {"type": "json_schema", "name": "verdict", "schema": schema, "strict": True}},
        max_output_tokens=40,
        temperature=0,
    )
    assert isinstance(json.loads(r.output_text)["ok"], bool)
