"""OpenAIPolicy against a real local HTTP server: parsing, token ids, retries, limits, balancing."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "eval"))

from eval_fakeserver import FakeServer

from verigym.policies.base import PolicyError, sample
from verigym.policies.openai import OpenAIPolicy
from verigym.types import Message, Sampling

ASK = [Message(role="user", content="What is 2 + 3?")]
FAST = {"backoff_base": 0.01, "backoff_max": 0.05}


async def test_plain_completion_without_token_ids() -> None:
    with FakeServer() as srv:
        policy = OpenAIPolicy("m", [srv.url], **FAST)
        c = await policy.complete(ASK, sampling=Sampling(seed=1, temperature=0.0, max_tokens=16))
        await policy.aclose()
    assert c.text == "The answer is 5"
    assert c.finish_reason == "stop" and c.usage.prompt_tokens == 7 and c.usage.completion_tokens == 4
    assert c.completion_token_ids is None and not c.token_ids_exact
    body = srv.requests[0]
    assert body["seed"] == 1 and body["max_tokens"] == 16 and body["temperature"] == 0.0
    assert body["return_token_ids"] is True


@pytest.mark.parametrize("transport", ["aiohttp", "sdk"])
async def test_vllm_token_ids_and_logprobs(transport: str) -> None:
    with FakeServer(vllm=True) as srv:
        policy = OpenAIPolicy("m", [srv.url], transport=transport, **FAST)  # type: ignore[arg-type]
        c = await policy.complete(ASK, sampling=Sampling(seed=1, logprobs=True, top_logprobs=3))
        await policy.aclose()
    assert c.token_ids_exact and c.completion_token_ids == (100, 101, 102, 103)
    assert c.prompt_token_ids == (1, 2, 3, 4, 5, 6, 7)
    assert c.logprobs is not None and len(c.logprobs) == 4
    assert c.top_logprobs is not None and all(
        len(t) == 3 and list(t) == sorted(t, reverse=True) for t in c.top_logprobs
    )


async def test_server_rejecting_token_ids_or_max_tokens_is_asked_again() -> None:
    with FakeServer(strict=True) as srv:
        policy = OpenAIPolicy("m", [srv.url], **FAST)
        a = await policy.complete(ASK, sampling=Sampling(seed=1))
        b = await policy.complete(ASK, sampling=Sampling(seed=2))
        await policy.aclose()
    assert a.text and b.text and not a.token_ids_exact
    assert len(srv.requests) == 4  # two rejections, then never again
    assert "return_token_ids" not in srv.requests[-1] and "max_tokens" not in srv.requests[-1]
    assert srv.requests[-1]["max_completion_tokens"] == 512


async def test_complete_n_and_sample() -> None:
    with FakeServer() as srv:
        policy = OpenAIPolicy("m", [srv.url], **FAST)
        many = await sample(policy, ASK, sampling=Sampling(n=3, seed=4))
        await policy.aclose()
    assert len(many) == 3 and len(srv.requests) == 1 and srv.requests[0]["n"] == 3


async def test_invalid_tool_arguments_are_kept_not_raised() -> None:
    with FakeServer(lambda body, attempt: "badargs") as srv:
        policy = OpenAIPolicy("m", [srv.url], **FAST)
        tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
        c = await policy.complete(ASK, tools=tools, sampling=Sampling(seed=1))
        await policy.aclose()
    assert srv.requests[0]["tools"] == tools
    assert c.finish_reason == "tool_calls" and c.tool_calls[0].arguments == '{"a": 1,'
    with pytest.raises(ValueError, match="not valid JSON"):
        c.tool_calls[0].parsed_arguments()


@pytest.mark.parametrize("transport", ["aiohttp", "sdk", "sdk-httpx"])
@pytest.mark.parametrize("fault", ["500", "trunc", "empty", "slow"])
async def test_transient_faults_are_retried(fault: str, transport: str) -> None:
    # a "slow" answer would come after 30 s, far past the 1 s timeout, which the good answer (a few
    # ms) is far inside; the other faults answer at once, so their timeout only bounds a hang
    timeout = 1.0 if fault == "slow" else 30.0
    with FakeServer(lambda body, attempt: fault if attempt < 2 else None, slow_s=30) as srv:
        policy = OpenAIPolicy("m", [srv.url], timeout=timeout, max_retries=3, transport=transport, **FAST)  # type: ignore[arg-type]
        c = await policy.complete(ASK, sampling=Sampling(seed=1))
        await policy.aclose()
    assert c.text == "The answer is 5" and policy.retries == 2


@pytest.mark.parametrize("transport", ["aiohttp", "sdk"])
async def test_429_honours_retry_after(transport: str) -> None:
    with FakeServer(lambda body, attempt: "429" if attempt < 1 else None, retry_after="0.4") as srv:
        policy = OpenAIPolicy("m", [srv.url], max_retries=2, transport=transport, **FAST)  # type: ignore[arg-type]
        start = time.perf_counter()
        c = await policy.complete(ASK, sampling=Sampling(seed=1))
        waited = time.perf_counter() - start
        await policy.aclose()
    assert c.text and waited >= 0.4


@pytest.mark.parametrize("transport", ["aiohttp", "sdk"])
async def test_other_4xx_is_not_retried(transport: str) -> None:
    with FakeServer(lambda body, attempt: "400") as srv:
        policy = OpenAIPolicy("m", [srv.url], max_retries=3, transport=transport, **FAST)  # type: ignore[arg-type]
        with pytest.raises(PolicyError) as info:
            await policy.complete(ASK, sampling=Sampling(seed=1))
        await policy.aclose()
    assert info.value.kind == "bad_request" and not info.value.retryable and "HTTP 400" in str(info.value)
    assert len(srv.requests) == 1


async def test_exhausted_retries_raise_policy_error_with_reason() -> None:
    with FakeServer(lambda body, attempt: "slow", slow_s=30) as srv:  # far past the timeout, for certain
        policy = OpenAIPolicy("m", [srv.url], timeout=0.2, max_retries=1, **FAST)
        with pytest.raises(PolicyError) as info:
            await policy.complete(ASK, sampling=Sampling(seed=1))
        await policy.aclose()
    assert info.value.kind == "timeout" and "after 2 attempts" in str(info.value)


@pytest.mark.parametrize("transport", ["aiohttp", "sdk", "sdk-httpx"])
async def test_unreachable_endpoint(transport: str) -> None:
    policy = OpenAIPolicy("m", ["http://127.0.0.1:9/v1"], max_retries=1, transport=transport, **FAST)  # type: ignore[arg-type]
    with pytest.raises(PolicyError) as info:
        await policy.check(timeout=2)
    assert info.value.kind == "connection" and "127.0.0.1:9" in str(info.value)
    with pytest.raises(PolicyError):
        await policy.complete(ASK, sampling=Sampling())
    await policy.aclose()


@pytest.mark.parametrize("transport", ["aiohttp", "sdk", "sdk-httpx"])
async def test_concurrency_bound_and_load_balancing(transport: str) -> None:
    # both servers hold every request until the test releases them: once three have reached each,
    # the released three are in flight at once there, however slowly the client sent them
    with FakeServer(delay_s=0.05, hold_after=0) as a, FakeServer(delay_s=0.05, hold_after=0) as b:
        policy = OpenAIPolicy("m", [a.url, b.url], concurrency=3, transport=transport, **FAST)  # type: ignore[arg-type]
        assert await policy.check() == ["fake-model"]
        done = asyncio.gather(*(policy.complete(ASK, sampling=Sampling(seed=i)) for i in range(24)))
        end = time.monotonic() + 60  # only bounds a hang
        while not (a.n_requests == 3 and b.n_requests == 3):
            assert time.monotonic() < end and not done.done(), (a.n_requests, b.n_requests)
            await asyncio.sleep(0.005)
        a.release()
        b.release()
        await done
        await policy.aclose()
    assert len(a.requests) == len(b.requests) == 12
    assert a.max_in_flight <= 3 and b.max_in_flight <= 3 and a.max_in_flight == 3
