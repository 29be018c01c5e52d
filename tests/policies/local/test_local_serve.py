"""`verigym serve` against the official openai client: chat, completions, n, logprobs, stream, stops,
token ids, errors as OpenAI-style 4xx, LoRA over HTTP, micro-batching, and the CLI in a subprocess."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from verigym.policies.local import LocalPolicy
from verigym.policies.local.chat import encode_chat, strip_markers
from verigym.serve import RunningServer, spawn_server
from verigym.types import Message, Sampling

USER = [{"role": "user", "content": "12+34="}]


@pytest.fixture(scope="module")
def server(tiny_dir: Path, adapter_dir: Path) -> Iterator[tuple[RunningServer, LocalPolicy]]:
    policy = LocalPolicy.from_pretrained(tiny_dir, device="cpu")
    with RunningServer(policy, name="tiny", adapter_dir=adapter_dir.parent) as srv:
        yield srv, policy


@pytest.fixture(scope="module")
def client(server: tuple[RunningServer, LocalPolicy]) -> openai.OpenAI:
    return openai.OpenAI(base_url=server[0].url, api_key="none", max_retries=0)


def test_chat_returns_text_token_ids_and_logprobs(
    server: tuple[RunningServer, LocalPolicy], client: openai.OpenAI
) -> None:
    _, policy = server
    assert [m.id for m in client.models.list().data] == ["tiny"]
    r = client.chat.completions.create(
        model="tiny",
        messages=USER,
        n=3,
        max_tokens=12,
        seed=7,
        logprobs=True,
        top_logprobs=2,  # type: ignore[arg-type]
    )
    assert len(r.choices) == 3 and r.usage is not None
    assert r.model_extra is not None and r.model_extra["prompt_token_ids"] == encode_chat(
        policy.tokenizer, USER
    )
    assert r.usage.prompt_tokens == len(r.model_extra["prompt_token_ids"])
    total = 0
    for choice in r.choices:
        ids = (choice.model_extra or {})["token_ids"]
        total += len(ids)
        text = strip_markers(policy.tokenizer.decode(ids, skip_special_tokens=True), policy.markers)
        assert text == (choice.message.content or "")
        assert choice.logprobs is not None and choice.logprobs.content is not None
        assert len(choice.logprobs.content) == len(ids)
        assert all(len(t.top_logprobs) == 2 for t in choice.logprobs.content)
        assert choice.finish_reason in ("stop", "length")
    assert r.usage.completion_tokens == total
    again = client.chat.completions.create(model="tiny", messages=USER, n=3, max_tokens=12, seed=7)  # type: ignore[arg-type]
    assert [c.message.content for c in again.choices] == [c.message.content for c in r.choices]
    local = policy.generate([[Message(role="user", content="12+34=")]], Sampling(max_tokens=12), seeds=[8])[0]
    assert list(local.completion_token_ids or ()) == (r.choices[1].model_extra or {})["token_ids"]


def test_stream_and_stop_and_completions(client: openai.OpenAI) -> None:
    full = client.chat.completions.create(model="tiny", messages=USER, max_tokens=20, seed=3)  # type: ignore[arg-type]
    text = full.choices[0].message.content or ""
    stream = client.chat.completions.create(
        model="tiny",
        messages=USER,
        max_tokens=20,
        seed=3,
        stream=True,
        stream_options={"include_usage": True},  # type: ignore[arg-type]
    )
    chunks = list(stream)
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == text and len([c for c in chunks if c.choices]) > 2
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == full.usage.completion_tokens  # type: ignore[union-attr]
    assert len(text) >= 4
    stop = text[2:4]
    cut = client.chat.completions.create(model="tiny", messages=USER, max_tokens=20, seed=3, stop=[stop])  # type: ignore[arg-type]
    assert (
        cut.choices[0].message.content == text[: text.find(stop)] and cut.choices[0].finish_reason == "stop"
    )
    cut_stream = client.chat.completions.create(
        model="tiny", messages=USER, max_tokens=20, seed=3, stop=[stop], stream=True
    )  # type: ignore[arg-type]
    assert (
        "".join(c.choices[0].delta.content or "" for c in cut_stream if c.choices) == text[: text.find(stop)]
    )
    comp = client.completions.create(
        model="tiny", prompt=["1+1=", "2+2="], max_tokens=6, n=2, logprobs=3, seed=1
    )
    assert len(comp.choices) == 4
    lp = comp.choices[0].logprobs
    assert lp is not None and lp.tokens is not None and lp.top_logprobs is not None
    assert "".join(lp.tokens).startswith(comp.choices[0].text) and len(lp.top_logprobs[0]) == 3


def test_bad_requests_get_openai_style_4xx(
    server: tuple[RunningServer, LocalPolicy], client: openai.OpenAI
) -> None:
    with pytest.raises(openai.NotFoundError) as nf:
        client.chat.completions.create(model="nope", messages=USER)  # type: ignore[arg-type]
    assert nf.value.body["code"] == "model_not_found"  # type: ignore[index]
    for bad in ({"max_tokens": -1}, {"temperature": -1.0}, {"top_p": 0.0}, {"messages": []}, {"n": 0}):
        kwargs = {"model": "tiny", "messages": USER, **bad}
        with pytest.raises(openai.BadRequestError) as br:
            client.chat.completions.create(**kwargs)  # type: ignore[call-overload]
        assert br.value.status_code == 400 and br.value.body["type"] == "invalid_request_error"  # type: ignore[index]
    url = server[0].url
    for body in (b"{not json", b"[]", b'{"model": "tiny", "messages": [{"role": "wizard", "content": "x"}]}'):
        r = httpx.post(f"{url}/chat/completions", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 400 and "message" in r.json()["error"]
    r = httpx.post(f"{url}/completions", json={"model": "tiny", "prompt": [99999], "max_tokens": 2})
    assert r.status_code == 400
    long_prompt = [{"role": "user", "content": "7" * 3000}]
    r = httpx.post(f"{url}/chat/completions", json={"model": "tiny", "messages": long_prompt})
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length"
    assert httpx.get(f"{url}/nothing").status_code == 404
    assert httpx.get(url.removesuffix("/v1") + "/health").json() == {"status": "ok"}


def test_lora_load_and_unload_over_http(
    server: tuple[RunningServer, LocalPolicy], client: openai.OpenAI, adapter_dir: Path
) -> None:
    url = server[0].url
    args = {"messages": USER, "max_tokens": 10, "seed": 5, "logprobs": True}

    def logprobs(model: str) -> list[float]:
        r = client.chat.completions.create(model=model, **args)  # type: ignore[call-overload]
        return [t.logprob for t in r.choices[0].logprobs.content]

    base = logprobs("tiny")
    r = httpx.post(f"{url}/load_lora_adapter", json={"lora_name": "ft", "lora_path": str(adapter_dir)})
    assert r.status_code == 200, r.text
    assert {m.id for m in client.models.list().data} == {"tiny", "ft"}
    tuned = logprobs("ft")
    assert max(abs(a - b) for a, b in zip(base, tuned, strict=False)) > 1e-3
    assert logprobs("tiny") == pytest.approx(base, abs=1e-5)
    r = httpx.post(f"{url}/unload_lora_adapter", json={"lora_name": "ft"})
    assert r.status_code == 200
    with pytest.raises(openai.NotFoundError):
        logprobs("ft")
    assert logprobs("tiny") == pytest.approx(base, abs=1e-5)
    bad = httpx.post(f"{url}/load_lora_adapter", json={"lora_name": "x", "lora_path": "/no/such/adapter"})
    assert bad.status_code == 403 and bad.json()["error"]["code"] == "path_not_allowed"  # outside the dir
    missing = str(adapter_dir.parent / "no-such-adapter")
    bad = httpx.post(f"{url}/load_lora_adapter", json={"lora_name": "x", "lora_path": missing})
    assert bad.status_code == 404 and bad.json()["error"]["message"]
    by_name = httpx.post(f"{url}/load_lora_adapter", json={"lora_name": "ft2", "lora_path": adapter_dir.name})
    assert by_name.status_code == 200  # a relative path is taken from the adapter directory
    assert httpx.post(f"{url}/unload_lora_adapter", json={"lora_name": "ft2"}).status_code == 200
    assert httpx.post(f"{url}/unload_lora_adapter", json={"lora_name": "ft"}).status_code == 404


async def test_concurrent_requests_are_micro_batched(
    server: tuple[RunningServer, LocalPolicy], monkeypatch: pytest.MonkeyPatch
) -> None:
    srv, policy = server
    # the first pass waits until all 24 requests reached the policy, so the others queue behind it
    # however slowly they arrive (60 s only bounds a failure)
    submitted, all_in = [0], threading.Event()
    submit, run = policy.submit, policy.run

    async def counted(*args: Any, **kwargs: Any) -> Any:
        submitted[0] += 1
        if submitted[0] >= 24:
            all_in.set()
        return await submit(*args, **kwargs)

    def held(*args: Any, **kwargs: Any) -> Any:
        all_in.wait(60)
        return run(*args, **kwargs)

    monkeypatch.setattr(policy, "submit", counted)
    monkeypatch.setattr(policy, "run", held)
    aclient = openai.AsyncOpenAI(base_url=srv.url, api_key="none", max_retries=0)
    before = policy.passes
    results = await asyncio.gather(
        *(
            aclient.chat.completions.create(model="tiny", messages=USER, max_tokens=8, seed=i)
            for i in range(24)
        )  # type: ignore[arg-type]
    )
    assert len(results) == 24
    assert policy.passes - before < 12  # many requests shared each generation pass
    await aclient.close()


def test_the_cli_serves_a_saved_model_directory(tiny_dir: Path, adapter_dir: Path) -> None:
    proc, url = spawn_server(str(tiny_dir), "--name", "m", "--lora", f"ft={adapter_dir}", timeout_s=60)
    try:
        c = openai.OpenAI(base_url=url, api_key="none", max_retries=0)
        r = c.chat.completions.create(model="m", messages=USER, max_tokens=5, logprobs=True)  # type: ignore[arg-type]
        assert len((r.choices[0].model_extra or {})["token_ids"]) == r.usage.completion_tokens  # type: ignore[union-attr]
        assert r.choices[0].logprobs is not None
        assert {m.id for m in c.models.list().data} == {"m", "ft"}
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = str(held.getsockname()[1])
        busy = subprocess.run(
            [sys.executable, "-m", "verigym", "serve", str(tiny_dir), "--port", taken],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert busy.returncode == 2 and f"--port {taken}" in busy.stderr + busy.stdout


def test_tool_calls_are_parsed_in_responses_and_streams(
    tool_model_dir: Path, tool_case: dict[str, Any]
) -> None:
    TOOL_PROMPT, TOOLS = tool_case["messages"], tool_case["tools"]
    with RunningServer(LocalPolicy.from_pretrained(tool_model_dir, device="cpu"), name="t") as srv:
        client = openai.OpenAI(base_url=srv.url, api_key="none", max_retries=0)
        args = {"model": "t", "messages": TOOL_PROMPT, "tools": TOOLS, "temperature": 0.0, "max_tokens": 80}
        r = client.chat.completions.create(**args)  # type: ignore[call-overload]
        choice = r.choices[0]
        assert choice.finish_reason == "tool_calls", (choice, r.model_extra)
        assert choice.message.content == "ok"
        call = choice.message.tool_calls[0]
        assert (
            call.function.name == "add"
            and call.function.arguments == '{"a": 1}'
            and call.id.startswith("call_")
        )
        chunks = list(client.chat.completions.create(stream=True, **args))  # type: ignore[call-overload]
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        calls = [t for c in chunks if c.choices for t in (c.choices[0].delta.tool_calls or [])]
        assert text == "ok" and [t.function.name for t in calls] == ["add"]
        assert chunks[-1].choices[0].finish_reason == "tool_calls"
        plain = client.chat.completions.create(**{**args, "tools": None, "messages": TOOL_PROMPT})  # type: ignore[call-overload]
        assert plain.choices[0].message.tool_calls is None


AGENT_LOOP: list[dict[str, Any]] = [
    {"role": "user", "content": "add 1"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "2"},
]
# SmolLM2-Instruct's chat template: plain ChatML, nothing about tools.
CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


@pytest.mark.filterwarnings("ignore:the chat template")
def test_agent_loop_messages_with_null_content_and_tool_calls_get_200(
    server: tuple[RunningServer, LocalPolicy],
) -> None:
    from verigym.policies import tiny

    tok = tiny.build_tokenizer()
    tok.chat_template = CHATML
    tok.name_or_path = "HuggingFaceTB/SmolLM2-135M-Instruct"
    smol = LocalPolicy(tiny.build_model("tiny", tok), tok, name="smol", device="cpu")
    assert smol.tool_format == "smollm2"
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    with RunningServer(smol, name="smol") as srv:
        for url, policy, model in ((server[0].url, server[1], "tiny"), (srv.url, smol, "smol")):
            for extra in ({"tools": tools}, {}):
                body = {"model": model, "messages": AGENT_LOOP, "max_tokens": 4, "seed": 0, **extra}
                r = httpx.post(f"{url}/chat/completions", json=body, timeout=60)
                assert r.status_code == 200, r.text
                prompt = policy.tokenizer.decode(r.json()["prompt_token_ids"])
                assert '"name": "add"' in prompt and '{"a": 1}' in prompt and "2" in prompt
                assert "None" not in prompt
            if model == "smol":  # the call and the result in the format SmolLM2 was trained with
                assert '<tool_call>[{"name": "add", "arguments": {"a": 1}}]</tool_call>' in prompt
                assert "<|im_start|>user\n<tool_response>\n2\n</tool_response>" in prompt


async def test_openai_policy_gets_the_same_ids_and_logprobs_as_in_process(
    server: tuple[RunningServer, LocalPolicy],
) -> None:
    from verigym.policies.openai import OpenAIPolicy

    srv, policy = server
    remote = OpenAIPolicy("tiny", [srv.url], api_key="none")
    prompt = [Message(role="user", content="7+8=")]
    got = await remote.complete(
        prompt, sampling=Sampling(max_tokens=10, seed=11, logprobs=True, top_logprobs=2)
    )
    want = policy.generate([prompt], Sampling(max_tokens=10), seeds=[11])[0]
    assert got.token_ids_exact and got.completion_token_ids == want.completion_token_ids
    assert got.prompt_token_ids == want.prompt_token_ids and got.text == want.text
    assert max(abs(a - b) for a, b in zip(got.logprobs or (), want.logprobs or (), strict=True)) < 1e-6
