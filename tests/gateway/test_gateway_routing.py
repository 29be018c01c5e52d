"""The routing contract of ``docs/gateway.md``, carrier by carrier (the conformance test): each of the
URL path ``/sessions/{id}/v1``, the session key as the API key and the ``X-Session-ID`` header routes a
call to its session among two open ones, an unknown session gets a 401, a closed one a 409, and the
record holds the exact ids the response carried. Then what holds across carriers: precedence and
disagreement, ``/health`` and ``/v1/models``, ``n`` > 1 refused, the session's sampling applied."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from verigym.gateway import Gateway, Session
from verigym.gateway._recording import apply
from verigym.serve._wire import ChatRequest
from verigym.types import Sampling

CARRIERS = ["path", "key", "header"]
MESSAGES = [{"role": "user", "content": "12+34="}]


def client(s: Session, carrier: str, *, sid: str | None = None, key: str | None = None) -> openai.OpenAI:
    """An OpenAI client that names session ``s`` (or ``sid``/``key`` instead) by ``carrier``, as the
    peers do: rLLM's URL path, verifiers' per-rollout API key, SkyRL's header."""
    if carrier == "path":
        base = s.base_url if sid is None else s.base_url.replace(f"/sessions/{s.id}/", f"/sessions/{sid}/")
        return openai.OpenAI(base_url=base, api_key="none", max_retries=0)
    if carrier == "key":
        return openai.OpenAI(base_url=s.plain_url, api_key=key or s.key, max_retries=0)
    headers = {"X-Session-ID": sid or s.id}
    return openai.OpenAI(base_url=s.plain_url, api_key="none", max_retries=0, default_headers=headers)


def chat(c: openai.OpenAI, **extra: Any) -> Any:
    args: dict[str, Any] = {"model": "tiny", "messages": MESSAGES, "max_tokens": 6, **extra}
    return c.chat.completions.create(**args)


@pytest.mark.parametrize("carrier", CARRIERS)
def test_every_carrier_routes_records_and_refuses(gateway: Gateway, carrier: str) -> None:
    a, b = gateway.open(), gateway.open()
    r = chat(client(b, carrier), seed=3)
    assert gateway.calls(a.id) == []
    [rec] = gateway.calls(b.id)
    assert rec.index == 0 and rec.dialect == "chat" and not rec.stream and rec.replayed == 0
    assert list(rec.completion.completion_token_ids or ()) == (r.choices[0].model_extra or {})["token_ids"]
    assert list(rec.completion.prompt_token_ids or ()) == (r.model_extra or {})["prompt_token_ids"]
    assert rec.completion.token_ids_exact and rec.completion.text == r.choices[0].message.content
    assert rec.completion.finish_reason == r.choices[0].finish_reason
    assert len(rec.completion.logprobs or ()) == len(rec.completion.completion_token_ids or ())
    assert rec.messages == MESSAGES and rec.tools is None and rec.seed == 3 and rec.wall_s > 0
    chat(client(a, carrier))
    assert len(gateway.calls(a.id)) == 1 and len(gateway.calls(b.id)) == 1

    with pytest.raises(openai.AuthenticationError, match="session"):
        chat(client(a, carrier, sid="never-opened", key="vg-not-a-key"))

    calls = gateway.close(b.id)
    assert [c.index for c in calls] == [0]
    with pytest.raises(openai.ConflictError, match="has ended"):
        chat(client(b, carrier))
    assert len(gateway.close(a.id)) == 1


@pytest.mark.parametrize("carrier", CARRIERS)
def test_the_refusals_tell_sdks_not_to_retry(gateway: Gateway, carrier: str) -> None:
    s = gateway.open()
    gateway.close(s.id)
    url, headers = s.plain_url, {"Authorization": "Bearer none"}
    if carrier == "path":
        url = s.base_url
    elif carrier == "key":
        headers = {"Authorization": f"Bearer {s.key}"}
    else:
        headers["X-Session-ID"] = s.id
    body = {"model": "tiny", "messages": MESSAGES, "max_tokens": 2}
    r = httpx.post(f"{url}/chat/completions", json=body, headers=headers)
    assert r.status_code == 409 and r.headers["x-should-retry"] == "false"
    assert r.json()["error"]["code"] == "session_ended"
    r = httpx.post(f"{s.plain_url}/chat/completions", json=body)
    assert r.status_code == 401 and r.headers["x-should-retry"] == "false"
    assert r.json()["error"]["code"] == "unknown_session"


def test_carriers_that_disagree_get_a_400_and_a_stray_key_is_ignored(gateway: Gateway) -> None:
    a, b = gateway.open(), gateway.open()
    body = {"model": "tiny", "messages": MESSAGES, "max_tokens": 2}
    r = httpx.post(f"{a.base_url}/chat/completions", json=body, headers={"X-Session-ID": b.id})
    assert r.status_code == 400 and r.json()["error"]["code"] == "session_mismatch"
    r = httpx.post(f"{a.base_url}/chat/completions", json=body, headers={"Authorization": f"Bearer {b.key}"})
    assert r.status_code == 400 and b.key not in r.text
    agree = {"Authorization": f"Bearer {a.key}", "X-Session-ID": a.id}
    assert httpx.post(f"{a.base_url}/chat/completions", json=body, headers=agree).status_code == 200
    stray = {"Authorization": "Bearer sk-whatever", "x-api-key": "EMPTY"}
    assert httpx.post(f"{a.base_url}/chat/completions", json=body, headers=stray).status_code == 200
    assert len(gateway.close(a.id)) == 2 and gateway.close(b.id) == []


def test_health_needs_no_session_and_models_needs_one(gateway: Gateway) -> None:
    s = gateway.open()
    assert httpx.get(f"{gateway.url}/health").json() == {"status": "ok"}
    assert httpx.get(f"{gateway.url}/v1/models").status_code == 401
    models = client(s, "path").models.list()
    assert [m.id for m in models.data] == [gateway.policy.name]
    r = httpx.post(f"{s.base_url}/completions", json={"model": "tiny", "prompt": "1"})
    assert r.status_code == 404  # text completions are not served: a call has messages
    gateway.close(s.id)


def test_n_above_one_is_refused_and_any_model_name_reaches_the_policy(gateway: Gateway) -> None:
    s = gateway.open()
    with pytest.raises(openai.BadRequestError, match="one choice per call"):
        chat(client(s, "key"), n=2)
    r = chat(client(s, "key"), model="gpt-4o")
    assert r.model == "gpt-4o" and len(gateway.calls(s.id)) == 1
    gateway.close(s.id)


def test_the_session_sampling_overrides_the_request(gateway: Gateway) -> None:
    run = Sampling(temperature=1.0, seed=5, max_tokens=12)
    greedy = {"temperature": 0, "max_tokens": 40}
    outs = []
    for _ in range(2):  # two rollouts with the run's sampling: the same sample, call by call
        s = gateway.open(run)
        first, second = chat(client(s, "path"), **greedy), chat(client(s, "path"), **greedy)
        recs = gateway.close(s.id)
        assert [r.seed for r in recs] == [5, 6]  # seed + call index
        outs.append([(c.choices[0].model_extra or {})["token_ids"] for c in (first, second)])
    assert outs[0] == outs[1]
    assert all(len(ids) <= 12 for ids in outs[0])  # max_tokens capped by the session
    free = gateway.open()
    by_hand = chat(client(free, "path"), temperature=1.0, seed=5, max_tokens=12)
    argmax = chat(client(free, "path"), temperature=0, max_tokens=12)
    assert (by_hand.choices[0].model_extra or {})["token_ids"] == outs[0][0]  # sampled at T=1, seed 5
    assert (argmax.choices[0].model_extra or {})["token_ids"] != outs[0][0]
    small = gateway.open(run)
    assert len((chat(client(small, "path"), max_tokens=2).choices[0].model_extra or {})["token_ids"]) <= 2
    gateway.close(free.id)
    gateway.close(small.id)


def test_apply_sets_the_sampling_and_caps_max_tokens() -> None:
    sent = {"temperature": 0.0, "top_k": 3, "seed": 1, "max_completion_tokens": 50}
    req = ChatRequest.model_validate({"model": "m", "messages": MESSAGES, **sent})
    run = Sampling(temperature=0.7, top_p=0.9, seed=10, max_tokens=600)
    got = apply(req, run, 2)
    assert (got.temperature, got.top_p, got.top_k, got.seed, got.max_tokens) == (0.7, 0.9, None, 12, 50)
    assert got.max_completion_tokens is None and apply(req, None, 2) is req
    bare = ChatRequest.model_validate({"model": "m", "messages": MESSAGES, "seed": 1})
    assert apply(bare, run, 0).max_tokens == 600  # no limit sent: the session's (not the default 512)
    assert apply(bare, Sampling(max_tokens=8), 0).seed == 1  # no run seed: the request's is kept


def test_open_refuses_a_used_or_malformed_id(gateway: Gateway) -> None:
    s = gateway.open(session_id="rollout-7")
    assert s.base_url == f"{gateway.url}/sessions/rollout-7/v1" and s.key.startswith("vg-")
    with pytest.raises(ValueError, match="used already"):
        gateway.open(session_id="rollout-7")
    with pytest.raises(ValueError, match="letters"):
        gateway.open(session_id="a/b")
    gateway.close("rollout-7")
    with pytest.raises(KeyError, match="closed already"):
        gateway.close("rollout-7")
    with pytest.raises(ValueError, match="used already"):
        gateway.open(session_id="rollout-7")
