"""``verigym.testing.FakeOpenAIServer``, the fake server of the eval, hardening, policy and soak
runs: real HTTP from uvicorn, and each fault as a client sees it."""

from __future__ import annotations

import httpx
import pytest

from verigym.testing import FakeOpenAIServer, add_two_numbers

CHAT = {"model": "m", "messages": [{"role": "user", "content": "12+34="}]}


def test_answers_counts_and_faults_as_a_client_sees_them() -> None:
    faults = iter(["500", "429", "badjson", "trunc", "cut", "empty", None])
    with (
        FakeOpenAIServer(lambda body, attempt: next(faults), retry_after="0.2") as srv,
        httpx.Client() as client,
    ):
        post = lambda: client.post(f"{srv.url}/chat/completions", json=CHAT)  # noqa: E731
        assert post().status_code == 500
        r = post()
        assert r.status_code == 429 and r.headers["retry-after"] == "0.2" and "error" in r.json()
        r = post()
        assert r.status_code == 200 and r.content == b'{"choices": [ not json'
        r = post()
        assert r.status_code == 200 and len(r.content) < 200 and r.content.startswith(b"{")
        with pytest.raises(httpx.RemoteProtocolError):  # half the announced body, then the connection drops
            post()
        assert post().json()["choices"] == []
        r = post().json()
        assert r["choices"][0]["message"]["content"] == "46" and r["usage"]["prompt_tokens"] == 7
        assert client.get(f"{srv.url}/models").json()["data"][0]["id"] == "fake-model"
        assert client.get(f"{srv.url}/nowhere").status_code == 404
        assert client.post(f"{srv.url}/chat/completions", content=b"{oops").status_code == 400
    assert srv.n_requests == len(srv.requests) == 7
    assert srv.faults == {"500": 1, "429": 1, "badjson": 1, "trunc": 1, "cut": 1, "empty": 1}
    assert srv.attempts[('[{"role": "user", "content": "12+34="}]', None)] == 7


def test_key_model_and_token_ids() -> None:
    ask = {"model": "m", "messages": [{"role": "user", "content": "What is 2 + 3?"}], "seed": 1}
    with FakeOpenAIServer(answer=add_two_numbers, api_key="k", vllm=True, keep_requests=False) as srv:
        assert httpx.post(f"{srv.url}/chat/completions", json=ask).status_code == 401
        r = httpx.post(
            f"{srv.url}/chat/completions",
            json={**ask, "return_token_ids": True},
            headers={"Authorization": "Bearer k"},
        ).json()
    assert r["choices"][0]["message"]["content"] == "The answer is 5"
    assert r["choices"][0]["token_ids"] == [100, 101, 102, 103] and r["prompt_token_ids"] == [
        1,
        2,
        3,
        4,
        5,
        6,
        7,
    ]
    assert srv.requests == [] and srv.n_requests == 1
