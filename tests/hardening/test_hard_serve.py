"""Malformed requests against a real ``verigym serve`` (a subprocess on 127.0.0.1): each must get a 4xx
OpenAI-style JSON error, the server must stay up and keep answering, and its log must hold no
traceback (issue 14). Also: abandoned streams stop generating, ``/v1/completions`` streams, and no
special-token text reaches ``content``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from verigym.policies import tiny

MSG = [{"role": "user", "content": "12+34="}]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, subprocess.Popen[bytes], Path]]:
    """``verigym serve`` on a saved tiny model, its log captured to a file."""
    model = tiny.create("tiny", tmp_path_factory.mktemp("m") / "model", seed=0)
    log = tmp_path_factory.mktemp("log") / "serve.log"
    port = _free_port()
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "verigym", "serve", str(model), "--port", str(port), "--threads", "1",
             "--name", "tiny"],
            stdout=fh, stderr=subprocess.STDOUT, env={**os.environ, "OMP_NUM_THREADS": "1"},
        )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/health").status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.2)
    else:
        proc.terminate()
        raise RuntimeError(f"verigym serve did not start: {log.read_text()}")
    yield url, proc, log
    proc.terminate()
    proc.wait(20)


def chat(**extra: Any) -> dict[str, Any]:
    return {"model": "tiny", "messages": MSG, "max_tokens": 4, **extra}


RAW = "raw"  # a body given as bytes
CASES: dict[str, tuple[str, Any, str]] = {
    # name: (path, body, a word the error must contain)
    "not-json": ("/v1/chat/completions", (RAW, b"{not json"), "JSON"),
    "empty-body": ("/v1/chat/completions", (RAW, b""), ""),
    "array-body": ("/v1/chat/completions", [], ""),
    "stream-yes": ("/v1/chat/completions", chat(stream="yes"), "stream"),
    "stream-one": ("/v1/chat/completions", chat(stream=1), "stream"),
    "logprobs-string": ("/v1/chat/completions", chat(logprobs="true"), "logprobs"),
    "lone-surrogate": (
        "/v1/chat/completions",
        (RAW, b'{"model": "tiny", "messages": [{"role": "user", "content": "a\\ud800b"}]}'),
        "surrogate",
    ),
    "surrogate-in-name": (
        "/v1/chat/completions",
        (RAW, b'{"model": "tiny", "messages": [{"role": "user", "content": "hi", "name": "\\udfff"}]}'),
        "surrogate",
    ),
    "no-messages": ("/v1/chat/completions", {"model": "tiny"}, "messages"),
    "empty-messages": ("/v1/chat/completions", {"model": "tiny", "messages": []}, "messages"),
    "messages-string": ("/v1/chat/completions", {"model": "tiny", "messages": "hi"}, "messages"),
    "message-not-object": ("/v1/chat/completions", {"model": "tiny", "messages": ["hi"]}, "messages"),
    "bad-role": (
        "/v1/chat/completions",
        {"model": "tiny", "messages": [{"role": "wizard", "content": "x"}]},
        "role",
    ),
    "content-number": (
        "/v1/chat/completions",
        {"model": "tiny", "messages": [{"role": "user", "content": 123}]},
        "content",
    ),
    "no-model": ("/v1/chat/completions", {"messages": MSG}, "model"),
    "unknown-model": ("/v1/chat/completions", chat(model="gpt-9"), "gpt-9"),
    "n-zero": ("/v1/chat/completions", chat(n=0), "n"),
    "n-huge": ("/v1/chat/completions", chat(n=100000), "n"),
    "max-tokens-negative": ("/v1/chat/completions", chat(max_tokens=-1), "max_tokens"),
    "max-tokens-string": ("/v1/chat/completions", chat(max_tokens="8"), "max_tokens"),
    "temperature-string": ("/v1/chat/completions", chat(temperature="hot"), "temperature"),
    "temperature-high": ("/v1/chat/completions", chat(temperature=9), "temperature"),
    "top-p-zero": ("/v1/chat/completions", chat(top_p=0), "top_p"),
    "top-logprobs-high": ("/v1/chat/completions", chat(logprobs=True, top_logprobs=99), "top_logprobs"),
    "stop-number": ("/v1/chat/completions", chat(stop=5), "stop"),
    "seed-string": ("/v1/chat/completions", chat(seed="x"), "seed"),
    "tools-string": ("/v1/chat/completions", chat(tools="x"), "tools"),
    "stream-options-string": (
        "/v1/chat/completions",
        chat(stream=True, stream_options="x"),
        "stream_options",
    ),
    "prompt-too-long": (
        "/v1/chat/completions",
        {"model": "tiny", "messages": [{"role": "user", "content": "1" * 5000}]},
        "context",
    ),
    "completion-no-prompt": ("/v1/completions", {"model": "tiny"}, "prompt"),
    "completion-empty-prompt": ("/v1/completions", {"model": "tiny", "prompt": []}, "prompt"),
    "completion-bad-ids": ("/v1/completions", {"model": "tiny", "prompt": [10**9]}, "prompt"),
    "completion-logprobs-high": (
        "/v1/completions",
        {"model": "tiny", "prompt": "1+1=", "logprobs": 50},
        "logprobs",
    ),
    "completion-echo-string": ("/v1/completions", {"model": "tiny", "prompt": "1+1=", "echo": "yes"}, "echo"),
    "load-lora-missing-path": (  # weight loading is off unless --allow-adapter-loading DIR: 403
        "/v1/load_lora_adapter",
        {"lora_name": "a", "lora_path": "/nonexistent/x"},
        "--allow-adapter-loading",
    ),
    "load-lora-no-name": ("/v1/load_lora_adapter", {"lora_path": "/x"}, "lora_name"),
    "unload-unknown-lora": (
        "/v1/unload_lora_adapter",
        {"lora_name": "never-loaded"},
        "--allow-adapter-loading",
    ),
    "update-weights-bad-body": ("/update_weights_from_disk", {"model_path": 5}, "model_path"),
    "update-weights-missing": (
        "/update_weights_from_disk",
        {"model_path": "/nonexistent/w"},
        "--allow-adapter-loading",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_malformed_request_gets_4xx_json(name: str, server: tuple[str, Any, Path]) -> None:
    url, proc, _ = server
    path, body, word = CASES[name]
    if isinstance(body, tuple) and body[0] == RAW:
        r = httpx.post(url + path, content=body[1], headers={"Content-Type": "application/json"}, timeout=60)
    else:
        r = httpx.post(url + path, json=body, timeout=60)
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    error = r.json()["error"]
    assert isinstance(error["message"], str) and error["message"], r.text
    assert word in error["message"] or word == (error.get("param") or ""), (word, error)
    assert proc.poll() is None
    assert httpx.get(f"{url}/health").status_code == 200


def test_server_survives_and_logs_no_traceback(server: tuple[str, Any, Path]) -> None:
    url, proc, log = server
    r = httpx.post(f"{url}/v1/chat/completions", json=chat(), timeout=60)
    assert r.status_code == 200, r.text
    assert proc.poll() is None
    assert "Traceback" not in log.read_text(errors="replace")


def test_cases_cover_thirty_requests() -> None:
    assert len(CASES) >= 30


def test_completions_stream_as_sse(server: tuple[str, Any, Path]) -> None:
    url, _, _ = server
    body = {"model": "tiny", "prompt": "12+34=", "max_tokens": 6, "seed": 1, "temperature": 0}
    whole = httpx.post(f"{url}/v1/completions", json=body, timeout=60).json()["choices"][0]
    with httpx.stream("POST", f"{url}/v1/completions", json={**body, "stream": True}, timeout=60) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        lines = [ln[6:] for ln in r.iter_lines() if ln.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    chunks = [json.loads(x) for x in lines[:-1]]
    assert all(c["object"] == "text_completion" for c in chunks)
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["text"]
    assert chunks[-1]["choices"][0]["finish_reason"] == whole["finish_reason"]


def test_abandoned_streams_stop_generating(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In process, to see the rows: each stream's row waits (in the generating thread) at its 3rd
    token until the server marks it cancelled, the client hangs up only then, so the hang-up provably
    lands mid-row at any speed; the row must stop right there (not after its 1500 tokens)."""
    from verigym.policies.local import LocalPolicy, RowSpec
    from verigym.serve import RunningServer

    model = tiny.create("tiny", tmp_path / "model", seed=0)
    policy = LocalPolicy.from_pretrained(model, device="cpu", stop_token_ids=[])  # no row ends early
    rows: list[RowSpec] = []
    made: dict[int, int] = {}
    passes = [0, 0]  # started, ended
    submit, run = policy.submit, policy.run

    def until(done: Callable[[], bool], what: str) -> None:  # 60 s only bounds a failure
        end = time.monotonic() + 60
        while not done():
            assert time.monotonic() < end, what
            time.sleep(0.002)

    async def watched(specs: list[RowSpec], *args: Any, **kwargs: Any) -> Any:
        for spec in specs if specs[0].max_tokens == 1500 else ():  # the streams' rows
            push = spec.on_token

            def on_token(token: int, spec: RowSpec = spec, push: Any = push) -> None:
                made[id(spec)] = made.get(id(spec), 0) + 1
                if push is not None:
                    push(token)
                if made[id(spec)] == 3:
                    with contextlib.suppress(AssertionError):  # never cancelled: the row runs on
                        until(lambda: spec.cancelled, "")

            spec.on_token = on_token
            rows.append(spec)
        return await submit(specs, *args, **kwargs)

    def counted(*args: Any, **kwargs: Any) -> Any:
        passes[0] += 1
        try:
            return run(*args, **kwargs)
        finally:
            passes[1] += 1

    monkeypatch.setattr(policy, "submit", watched)
    monkeypatch.setattr(policy, "run", counted)
    long = {"model": "tiny", "messages": MSG, "max_tokens": 1500, "stream": True, "temperature": 1.0}
    with RunningServer(policy, name="tiny") as srv:
        for i in range(20):
            with httpx.stream("POST", f"{srv.url}/chat/completions", json=long, timeout=60) as r:
                assert r.status_code == 200
                until(lambda i=i: len(rows) > i and made.get(id(rows[i]), 0) >= 3, "the row never started")
            # hung up; the next stream's row comes in a later pass
        until(lambda: passes[1] == passes[0], "the pass never ended")
        quick = chat(max_tokens=4, temperature=0)
        assert httpx.post(f"{srv.url}/chat/completions", json=quick, timeout=60).status_code == 200
    assert len(rows) == 20 and all(spec.cancelled for spec in rows)
    assert [made[id(spec)] for spec in rows] == [3] * 20  # not one token after the hang-up


def test_no_special_token_text_in_content(server: tuple[str, Any, Path]) -> None:
    url, _, _ = server
    markers = ("<|", "|>", "<tool_call>", "</tool_call>")
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    for i in range(12):
        body = chat(max_tokens=48, temperature=1.5, seed=i, n=4)
        if i % 2:
            body["tools"] = tools
        r = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=60)
        assert r.status_code == 200, r.text
        for choice in r.json()["choices"]:
            content = choice["message"]["content"] or ""
            assert not any(m in content for m in markers), content
