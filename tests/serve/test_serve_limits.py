"""``verigym serve``'s limits, in process (to hold and watch the policy) (issue 28): 429 with
``Retry-After`` when the concurrent requests or queued tokens are full, 400 for a request that could
never fit, shares given back; a client that hangs up mid-generation has its rows cancelled; a prompt
too long for the context is refused before it is tokenized; weight loading is off by default; the
CLI's flags and their errors.
"""

from __future__ import annotations

import http.client
import inspect
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from verigym.cli import app
from verigym.policies.local import LocalPolicy, RowSpec
from verigym.serve import RunningServer, ServeLimits, ServerLimits

MSG = [{"role": "user", "content": "12+34="}]


def chat(**extra: Any) -> dict[str, Any]:
    return {"model": "tiny", "messages": MSG, "max_tokens": 4, **extra}


def until(done: Callable[[], bool], what: str, limit_s: float = 60) -> None:
    end = time.monotonic() + limit_s  # bounds a failure only
    while not done():
        assert time.monotonic() < end, what
        time.sleep(0.002)


@pytest.fixture
def policy(tiny_dir: Path) -> LocalPolicy:
    return LocalPolicy.from_pretrained(tiny_dir, device="cpu")


def held(policy: LocalPolicy, monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Generation passes wait for the returned event (so requests stay in flight)."""
    gate, run = threading.Event(), policy.run

    def waiting(*args: Any, **kwargs: Any) -> Any:
        gate.wait(60)
        return run(*args, **kwargs)

    monkeypatch.setattr(policy, "run", waiting)
    return gate


def test_a_full_server_answers_429_with_retry_after_and_recovers(
    policy: LocalPolicy, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = held(policy, monkeypatch)
    limits = ServeLimits(max_concurrent_requests=2, max_queued_tokens=100, retry_after_s=3)
    with RunningServer(policy, name="tiny", limits=limits) as srv, ThreadPoolExecutor(4) as pool:
        admission = srv.app.state.handler.admission
        post = lambda body: httpx.post(f"{srv.url}/chat/completions", json=body, timeout=60)  # noqa: E731
        first = [pool.submit(post, chat(max_tokens=8, seed=i)) for i in range(2)]
        until(lambda: admission.requests == 2, "the two requests were never admitted")
        busy = post(chat(max_tokens=8))
        assert busy.status_code == 429 and busy.headers["retry-after"] == "3", busy.text
        error = busy.json()["error"]
        assert error["code"] == "rate_limit_exceeded" and "--max-concurrent-requests" in error["message"]
        never = post(chat(max_tokens=200))  # alone it needs more than the server ever holds
        assert never.status_code == 400 and never.json()["error"]["code"] == "request_too_large"
        gate.set()
        assert [f.result().status_code for f in first] == [200, 200]
        until(lambda: admission.requests == 0 and admission.tokens == 0, "the shares were not given back")
        gate.clear()
        # the tokens are full while the request count is not
        one = pool.submit(post, chat(max_tokens=60))
        until(lambda: admission.requests == 1, "never admitted")
        full = post(chat(max_tokens=30))
        assert full.status_code == 429 and "--max-queued-tokens" in full.json()["error"]["message"]
        stream = httpx.post(f"{srv.url}/chat/completions", json=chat(max_tokens=30, stream=True), timeout=60)
        assert stream.status_code == 429  # streams are counted before their response starts
        gate.set()
        assert one.result().status_code == 200
        until(lambda: admission.requests == 0 and admission.tokens == 0, "not given back")


def test_a_client_that_hangs_up_has_its_rows_cancelled(
    tiny_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain (non-streaming) request: its row waits at its 3rd token until the server cancels it, and
    the client hangs up only then; the row stops right there (not after its 1500 tokens), and the
    request's share is given back."""
    policy = LocalPolicy.from_pretrained(tiny_dir, device="cpu", stop_token_ids=[])  # no row ends early
    rows: list[RowSpec] = []
    made = [0]
    submit = policy.submit

    async def watched(specs: list[RowSpec], *args: Any, **kwargs: Any) -> Any:
        if rows:  # only the first request's row is watched
            return await submit(specs, *args, **kwargs)
        spec = specs[0]

        def on_token(_: int) -> None:
            made[0] += 1
            if made[0] == 3:
                end = time.monotonic() + 60
                while not spec.cancelled and time.monotonic() < end:
                    time.sleep(0.002)

        spec.on_token = on_token
        rows.append(spec)
        return await submit(specs, *args, **kwargs)

    monkeypatch.setattr(policy, "submit", watched)
    with RunningServer(policy, name="tiny") as srv:
        admission = srv.app.state.handler.admission
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        body = json.dumps(chat(max_tokens=1500, temperature=1.0))
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        until(lambda: made[0] >= 3, "the row never started")
        conn.close()  # hung up before any answer
        until(lambda: bool(rows) and rows[0].cancelled, "the row was not cancelled")
        until(lambda: admission.requests == 0, "the share was not given back")
        ok = httpx.post(f"{srv.url}/chat/completions", json=chat(temperature=0.0), timeout=60)
        assert ok.status_code == 200
    assert made[0] == 3  # not one token after the hang-up


def test_a_prompt_too_long_for_the_context_is_never_tokenized(
    policy: LocalPolicy, monkeypatch: pytest.MonkeyPatch
) -> None:
    import verigym.serve._handler as handler_module

    calls = [0]
    encode = handler_module.Handler.encode

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return encode(*args, **kwargs)

    monkeypatch.setattr(handler_module.Handler, "encode", counted)
    with RunningServer(policy, name="tiny") as srv:
        bound = srv.app.state.handler.bound
        assert bound.longest >= 1 and bound.max_chars == policy.context_length * bound.longest
        long = [{"role": "user", "content": "7" * (bound.max_chars + 1)}]
        start = time.monotonic()
        r = httpx.post(f"{srv.url}/chat/completions", json=chat(messages=long), timeout=60)
        assert r.status_code == 400 and r.json()["error"]["code"] == "context_length", r.text
        assert calls[0] == 0 and time.monotonic() - start < 5
        # one that might fit is tokenized, and refused after if it does not
        near = [{"role": "user", "content": "7" * (policy.context_length + 10)}]
        r = httpx.post(f"{srv.url}/chat/completions", json=chat(messages=near), timeout=60)
        assert r.status_code == 400 and r.json()["error"]["code"] == "context_length" and calls[0] == 1
        text = {"model": "tiny", "prompt": "7" * (bound.max_chars + 1)}
        r = httpx.post(f"{srv.url}/completions", json=text, timeout=60)
        assert r.status_code == 400 and "without tokenizing" in r.json()["error"]["message"]


def test_weight_loading_is_off_by_default(policy: LocalPolicy, tiny_dir: Path) -> None:
    with RunningServer(policy, name="tiny") as srv:
        root = srv.url.removesuffix("/v1")
        for path, body in (
            ("/v1/load_lora_adapter", {"lora_name": "a", "lora_path": str(tiny_dir)}),
            ("/v1/unload_lora_adapter", {"lora_name": "a"}),
            ("/update_weights_from_disk", {"model_path": str(tiny_dir)}),
        ):
            r = httpx.post(root + path, json=body, timeout=60)
            assert r.status_code == 403, r.text
            error = r.json()["error"]
            assert (
                error["code"] == "adapter_loading_disabled" and "--allow-adapter-loading" in error["message"]
            )


def test_the_cli_defaults_are_the_limits_defaults() -> None:
    from verigym._cli.serve_cmd import serve_cmd

    params = inspect.signature(serve_cmd).parameters
    defaults = ServeLimits()
    for name in ("max_body_bytes", "max_concurrent_requests", "max_queued_tokens"):
        assert params[name].default.default == getattr(defaults, name), name
    server = ServerLimits()
    for flag, field in (
        ("max_connections", "max_connections"),
        ("header_timeout", "header_timeout_s"),
        ("body_timeout", "body_timeout_s"),
        ("keep_alive_timeout", "keep_alive_s"),
    ):
        assert params[flag].default.default == getattr(server, field), flag


@pytest.mark.parametrize(
    ("args", "env", "word"),
    [
        (["--api-key", "k", "--api-key-env", "VG_KEY"], {"VG_KEY": "k"}, "give one of them"),
        (["--api-key-env", "VG_UNSET_KEY"], {}, "VG_UNSET_KEY is not set"),
        (["--api-key", " "], {}, "empty"),
        (["--allow-adapter-loading", "/no/such/dir"], {}, "no such directory"),
        (["--max-body-bytes", "0"], {}, "--max-body-bytes"),
        (["--max-concurrent-requests", "0"], {}, "--max-concurrent-requests"),
        (["--max-queued-tokens", "-1"], {}, "--max-queued-tokens"),
        (["--max-connections", "0"], {}, "--max-connections"),
        (["--header-timeout", "0"], {}, "--header-timeout"),
        (["--body-timeout", "nan"], {}, "--body-timeout"),
        (["--keep-alive-timeout", "inf"], {}, "--keep-alive-timeout"),
    ],
)
def test_bad_serve_flags_are_one_line_errors(
    args: list[str], env: dict[str, str], word: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VG_UNSET_KEY", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = CliRunner().invoke(app, ["serve", "tiny", "--port", "1", *args])
    assert result.exit_code == 2 and word in result.output, result.output
    assert "Traceback" not in result.output and " k " not in result.output
