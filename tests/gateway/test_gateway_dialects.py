"""Every dialect ``verigym serve`` speaks is recorded by the gateway, streamed and not, through the
official clients: ``openai`` chat completions and ``responses.create``, ``anthropic``
``messages.create``. Under a greedy session every dialect samples the same ids for the same user turn,
and the record holds exactly the ids the response carried; forced tool calls and structured outputs are
recorded with their tool calls and grammar."""

from __future__ import annotations

import json
from typing import Any
from unittest.mock import ANY

import anthropic
import openai
import pytest

from verigym.gateway import Gateway, RecordedCall, Session
from verigym.types import Sampling

GREEDY = Sampling(temperature=0.0, max_tokens=8)
PROMPT = "12+34="
ARGS = '{"expr": "417*823"}'
SCHEMA = {
    "type": "object",
    "properties": {"expr": {"type": "string", "enum": ["417*823"]}},
    "required": ["expr"],
    "additionalProperties": False,
}
CHAT_TOOL = {"type": "function", "function": {"name": "calc", "parameters": SCHEMA}}


def _openai(s: Session) -> openai.OpenAI:
    return openai.OpenAI(base_url=s.base_url, api_key="none", max_retries=0)


def _anthropic(s: Session) -> anthropic.Anthropic:  # the key carrier, as Anthropic's SDK sends it
    return anthropic.Anthropic(base_url=s.plain_url.removesuffix("/v1"), api_key=s.key, max_retries=0)


def _ids(extra: dict[str, Any] | None) -> tuple[list[int], list[int] | None]:
    extra = extra or {}
    return list(extra["token_ids"]), extra.get("prompt_token_ids")


def call(s: Session, dialect: str, stream: bool) -> tuple[list[int], list[int] | None]:
    """One call of ``dialect`` in session ``s``: the completion and prompt ids its response carried."""
    if dialect == "chat":
        args: dict[str, Any] = {"model": "tiny", "messages": [{"role": "user", "content": PROMPT}]}
        if not stream:
            r = _openai(s).chat.completions.create(**args)
            return list((r.choices[0].model_extra or {})["token_ids"]), (r.model_extra or {})[
                "prompt_token_ids"
            ]
        chunks = list(_openai(s).chat.completions.create(stream=True, **args))
        return [
            t for c in chunks for ch in c.choices for t in (ch.model_extra or {}).get("token_ids", [])
        ], None
    if dialect == "responses":
        if not stream:
            return _ids(_openai(s).responses.create(model="tiny", input=PROMPT).model_extra)
        events = list(_openai(s).responses.create(model="tiny", input=PROMPT, stream=True))
        return _ids(events[-1].response.model_extra)  # type: ignore[union-attr]
    margs: dict[str, Any] = {
        "model": "tiny",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": PROMPT}],
    }
    if not stream:
        return _ids(_anthropic(s).messages.create(**margs).model_extra)
    message_events = list(_anthropic(s).messages.create(stream=True, **margs))
    return _ids(next(e for e in message_events if e.type == "message_delta").model_extra)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("dialect", ["chat", "responses", "messages"])
def test_every_dialect_is_recorded_with_exact_ids(gateway: Gateway, dialect: str, stream: bool) -> None:
    ref = gateway.open(GREEDY)
    want, want_prompt = call(ref, "chat", False)
    gateway.close(ref.id)
    s = gateway.open(GREEDY)
    got, prompt = call(s, dialect, stream)
    [rec] = gateway.close(s.id)
    assert (rec.dialect, rec.stream, rec.index, rec.replayed) == (dialect, stream, 0, 0)
    assert list(rec.completion.completion_token_ids or ()) == got == want  # greedy: one answer
    assert list(rec.completion.prompt_token_ids or ()) == want_prompt
    assert prompt is None or prompt == want_prompt
    assert rec.completion.token_ids_exact and len(rec.completion.logprobs or ()) == len(want)
    assert rec.messages == [{"role": "user", "content": PROMPT}] and rec.tools is None


def _tool_call(rec: RecordedCall) -> None:
    assert rec.tools == [CHAT_TOOL] or (rec.tools and rec.tools[0]["function"]["name"] == "calc")
    assert rec.completion.constrained == "tool_call" and rec.completion.finish_reason == "tool_calls"
    [t] = rec.completion.tool_calls
    assert t.name == "calc" and json.loads(t.arguments) == json.loads(ARGS)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_forced_tool_calls_are_recorded_in_every_dialect(gateway: Gateway, stream: bool) -> None:
    s = gateway.open(Sampling(temperature=0.0, max_tokens=400))  # one call each, with its whitespace
    messages = [{"role": "user", "content": "417*823="}]
    chat_args: dict[str, Any] = {
        "tools": [CHAT_TOOL],
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "stream": stream,
    }
    chat = _openai(s).chat.completions.create(model="tiny", messages=messages, **chat_args)  # type: ignore[arg-type]
    if stream:
        list(chat)
    tool = {"type": "function", "name": "calc", "parameters": SCHEMA, "strict": True}
    named = {"type": "function", "name": "calc"}
    resp_args: dict[str, Any] = {
        "tools": [tool],
        "tool_choice": named,
        "parallel_tool_calls": False,
        "stream": stream,
    }
    r = _openai(s).responses.create(model="tiny", input="417*823=", **resp_args)
    if stream:
        list(r)
    msg_args: dict[str, Any] = {
        "tools": [{"name": "calc", "input_schema": SCHEMA}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "stream": stream,
    }
    m = _anthropic(s).messages.create(model="tiny", max_tokens=400, messages=messages, **msg_args)  # type: ignore[arg-type]
    if stream:
        list(m)
    recs = gateway.close(s.id)
    assert [(r.index, r.dialect, r.stream) for r in recs] == [
        (0, "chat", stream),
        (1, "responses", stream),
        (2, "messages", stream),
    ]
    for rec in recs:
        _tool_call(rec)


def test_structured_outputs_are_recorded_with_their_grammar(gateway: Gateway) -> None:
    s = gateway.open(Sampling(temperature=0.0, max_tokens=40))
    verdict = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    fmt = {"type": "json_schema", "name": "verdict", "schema": verdict, "strict": True}
    text: dict[str, Any] = {"format": fmt}
    r = _openai(s).responses.create(model="tiny", input="hi", text=text)  # type: ignore[call-overload]
    [rec] = gateway.close(s.id)
    assert rec.completion.constrained == "json_schema" and json.loads(r.output_text) == json.loads(
        rec.completion.text
    )


def test_anthropic_clients_get_anthropic_shaped_refusals(gateway: Gateway) -> None:
    s = gateway.open(GREEDY)
    args: dict[str, Any] = {
        "model": "tiny",
        "max_tokens": 4,
        "messages": [{"role": "user", "content": PROMPT}],
    }
    stranger = anthropic.Anthropic(base_url=gateway.url, api_key="sk-ant-nobody", max_retries=0)
    with pytest.raises(anthropic.AuthenticationError) as unknown:
        stranger.messages.create(**args)
    assert unknown.value.body == {"type": "error", "error": {"type": "authentication_error", "message": ANY}}
    by_path = anthropic.Anthropic(base_url=s.anthropic_url, api_key="none", max_retries=0)
    by_path.messages.create(**args)
    assert [c.dialect for c in gateway.close(s.id)] == ["messages"]
    with pytest.raises(anthropic.ConflictError, match="has ended"):
        anthropic.Anthropic(base_url=gateway.url, api_key=s.key).messages.create(**args)  # retries stay off
