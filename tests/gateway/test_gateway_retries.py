"""SDK retries are answered from the record, never sampled twice: a request with the same body and
``x-stainless-retry-count`` > 0 gets the first attempt's bytes (streamed replies too, and a first
attempt still running is waited for) and counts in ``replayed``; a new call, or a retry with another
body, samples. An ``openai`` client whose first attempt times out after the gateway answered retries
by itself and gets the recorded reply."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import openai

from verigym.gateway import Gateway

BODY: dict[str, Any] = {"model": "tiny", "messages": [{"role": "user", "content": "12+34="}], "max_tokens": 8}


def _post(url: str, body: dict[str, Any], retry: int | None = None) -> httpx.Response:
    headers = {} if retry is None else {"x-stainless-retry-count": str(retry)}
    return httpx.post(url, json=body, headers=headers, timeout=60)


def test_a_retry_is_replayed_and_a_new_call_samples(gateway: Gateway) -> None:
    s = gateway.open()
    url = f"{s.base_url}/chat/completions"
    first = _post(url, BODY, retry=0)
    again = _post(url, BODY, retry=1)
    assert first.status_code == again.status_code == 200 and again.content == first.content
    [rec] = gateway.calls(s.id)
    assert rec.replayed == 1
    assert _post(url, BODY, retry=2).content == first.content
    assert gateway.calls(s.id)[0].replayed == 2
    fresh = _post(url, BODY)  # the same body without the header: a new call
    other = _post(url, {**BODY, "max_tokens": 7}, retry=1)  # a retry of nothing kept: samples
    assert fresh.json()["id"] != first.json()["id"] and other.status_code == 200
    assert [(c.index, c.replayed) for c in gateway.close(s.id)] == [(0, 2), (1, 0), (2, 0)]
    assert _post(url, BODY, retry=1).status_code == 409  # the record is gone with the session


def test_streamed_replies_and_every_dialect_replay_byte_for_byte(gateway: Gateway) -> None:
    s = gateway.open()
    routes = [
        ("chat/completions", {**BODY, "stream": True}),
        ("responses", {"model": "tiny", "input": "12+34=", "max_output_tokens": 8, "stream": True}),
        ("messages", {"model": "tiny", "max_tokens": 8, "messages": BODY["messages"]}),
    ]
    for route, body in routes:
        first = _post(f"{s.base_url}/{route}", body)
        again = _post(f"{s.base_url}/{route}", body, retry=1)
        assert first.status_code == 200 and again.content == first.content, route
    recs = gateway.close(s.id)
    assert [(r.dialect, r.replayed) for r in recs] == [("chat", 1), ("responses", 1), ("messages", 1)]


def test_a_retry_waits_for_a_first_attempt_still_running(gateway: Gateway) -> None:
    s = gateway.open()
    url = f"{s.base_url}/chat/completions"
    body = {**BODY, "max_tokens": 400}
    out: dict[str, httpx.Response] = {}
    worker = threading.Thread(target=lambda: out.update(first=_post(url, body)))
    worker.start()
    live = gateway.sessions.live(s.id)
    while live is not None and live.started == 0:  # the first attempt is sampling
        time.sleep(0.002)
    again = _post(url, body, retry=1)
    worker.join()
    assert again.content == out["first"].content
    [rec] = gateway.close(s.id)
    assert rec.replayed == 1


class _TimeoutOnce(httpx.HTTPTransport):
    """Sends the first request through, reads the whole reply, then reports a timeout (as when the reply
    is lost on the way): the SDK retries the same body with ``x-stainless-retry-count: 1``."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[str | None] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        self.sent.append(request.headers.get("x-stainless-retry-count"))
        if len(self.sent) == 1:
            response.read()
            raise httpx.ReadTimeout("lost", request=request)
        return response


def test_the_openai_sdk_retry_gets_the_recorded_reply(gateway: Gateway) -> None:
    s = gateway.open()
    transport = _TimeoutOnce()
    client = openai.OpenAI(
        base_url=s.plain_url,
        api_key=s.key,
        max_retries=1,
        http_client=httpx.Client(transport=transport),  # type: ignore[arg-type]
    )
    r = client.chat.completions.create(**BODY)
    assert transport.sent == ["0", "1"]
    [rec] = gateway.close(s.id)
    assert rec.replayed == 1
    assert list(rec.completion.completion_token_ids or ()) == (r.choices[0].model_extra or {})["token_ids"]
