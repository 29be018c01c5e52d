"""``verigym serve --api-key-env`` (issue 28): every endpoint but ``/health`` needs ``Authorization:
Bearer KEY``, a missing or wrong key is a 401 in OpenAI's error shape (before the body is read), and
verigym's own clients, given the key, still work: ``OpenAIPolicy``, the openai SDK, the remote
sampler's weight pushes and ``verigym eval --base-url --api-key-env``. The key never reaches the log or
a run file.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from serve_clients import KEY, Served, raw_request, start_serve, stop_serve
from typer.testing import CliRunner

from verigym.cli import app
from verigym.policies.base import PolicyError
from verigym.policies.openai import OpenAIPolicy
from verigym.scale.remote import RemoteSampler, WeightPushError
from verigym.types import Message, Sampling

MSG = [{"role": "user", "content": "12+34="}]
WRONG = "vg-wrong-key-9876543210"


@pytest.fixture(scope="module")
def server(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    log = tmp_path_factory.mktemp("log") / "serve.log"
    adapters = tmp_path_factory.mktemp("adapters")
    served = start_serve(
        tiny_dir,
        log,
        "--api-key-env",
        "VG_SERVE_KEY",
        "--allow-adapter-loading",
        str(adapters),
        env={"VG_SERVE_KEY": KEY},
    )
    yield served
    stop_serve(served)


ENDPOINTS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/v1/models", None),
    ("POST", "/v1/chat/completions", {"model": "tiny", "messages": MSG, "max_tokens": 2}),
    ("POST", "/v1/chat/completions", {"model": "tiny", "messages": MSG, "max_tokens": 2, "stream": True}),
    ("POST", "/v1/completions", {"model": "tiny", "prompt": "1+1=", "max_tokens": 2}),
    ("POST", "/v1/load_lora_adapter", {"lora_name": "a", "lora_path": "x"}),
    ("POST", "/v1/unload_lora_adapter", {"lora_name": "a"}),
    ("POST", "/update_weights_from_disk", {"model_path": "x"}),
    ("GET", "/no/such/path", None),
]
BAD_HEADERS: dict[str, dict[str, str]] = {
    "none": {},
    "wrong": {"Authorization": f"Bearer {WRONG}"},
    "prefix": {"Authorization": f"Bearer {KEY[:-1]}"},
    "longer": {"Authorization": f"Bearer {KEY}x"},
    "basic": {"Authorization": f"Basic {KEY}"},
    "bare-key": {"Authorization": KEY},
    "empty-bearer": {"Authorization": "Bearer"},
    "other-header": {"X-Api-Key": KEY},
}


@pytest.mark.parametrize("bad", sorted(BAD_HEADERS))
def test_every_endpoint_but_health_needs_the_key(bad: str, server: Served) -> None:
    for method, path, body in ENDPOINTS:
        r = httpx.request(method, server.root + path, json=body, headers=BAD_HEADERS[bad], timeout=30)
        assert r.status_code == 401, (path, r.status_code, r.text)
        assert r.headers["www-authenticate"] == "Bearer"
        error = r.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert error["type"] == "invalid_request_error" and error["code"] == "invalid_api_key"
        assert KEY not in r.text and WRONG not in r.text
    assert httpx.get(f"{server.root}/health").json() == {"status": "ok"}  # no key needed


def test_the_right_key_opens_every_endpoint(server: Served) -> None:
    for scheme in ("Bearer", "bearer"):
        auth = {"Authorization": f"{scheme} {KEY}"}
        statuses = [
            httpx.request(m, server.root + p, json=b, headers=auth, timeout=60).status_code
            for m, p, b in ENDPOINTS
        ]
        assert statuses == [200, 200, 200, 200, 404, 404, 404, 404]  # the last four: not found, not 401


def test_a_huge_body_without_the_key_is_refused_unread(server: Served) -> None:
    head = [("Content-Type", "application/json"), ("Content-Length", str(50 * 1024 * 1024))]
    status, headers, _ = raw_request(server.port, "POST", "/v1/chat/completions", head, b"{", send_all=False)
    assert status == 401 and headers["www-authenticate"] == "Bearer"
    server.alive(2.0)


def test_the_openai_sdk_with_and_without_the_key(server: Served) -> None:
    good = openai.OpenAI(base_url=server.url, api_key=KEY, max_retries=0)
    r = good.chat.completions.create(model="tiny", messages=MSG, max_tokens=3)  # type: ignore[arg-type]
    assert r.choices[0].finish_reason in ("stop", "length")
    bad = openai.OpenAI(base_url=server.url, api_key=WRONG, max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()


async def test_openai_policy_sends_the_key_it_is_given(server: Served) -> None:
    policy = OpenAIPolicy("tiny", [server.url], api_key=KEY)
    assert await policy.check() == ["tiny"]
    got = await policy.complete(
        [Message(role="user", content="7+8=")], sampling=Sampling(max_tokens=5, seed=1)
    )
    assert got.token_ids_exact and got.completion_token_ids
    await policy.aclose()
    for key in (None, WRONG):
        keyless = OpenAIPolicy("tiny", [server.url], api_key=key, max_retries=0)
        with pytest.raises(PolicyError) as caught:
            await keyless.complete([Message(role="user", content="7+8=")], sampling=Sampling(max_tokens=5))
        assert caught.value.kind == "auth" and "401" in str(caught.value)
        await keyless.aclose()


async def test_the_remote_sampler_pushes_with_its_key(server: Served, tmp_path: Path) -> None:
    keyed = RemoteSampler([server.url], push_dir=tmp_path, api_key=KEY, retries=0)
    with pytest.raises(WeightPushError, match="HTTP 404"):  # past the key: the adapter is not loaded
        await keyed._post_all("/v1/unload_lora_adapter", {"lora_name": "never-loaded"})
    wrong = RemoteSampler([server.url], push_dir=tmp_path, api_key=WRONG, retries=0)
    with pytest.raises(WeightPushError, match="HTTP 401"):
        await wrong._post_all("/v1/unload_lora_adapter", {"lora_name": "never-loaded"})
    assert await keyed.policy.inner.check() == ["tiny"]  # sampling goes through the same key


async def test_ray_episodes_send_the_samplers_key(server: Served) -> None:
    """With --ray and remote servers, whole episodes run on actors that build their own client: it
    gets the sampler's key (the actor is called in process here; Ray only moves the arguments)."""
    from verigym.envs.registry import load_env
    from verigym.scale.ray_backend import _OnRay, _Worker
    from verigym.scale.remote import VersionedPolicy

    worker = _Worker({"a": ("arithmetic", {})})

    class Pool:
        async def call(self, method: str, *args: Any) -> Any:
            return await getattr(worker, method)(*args)

    env = load_env("arithmetic")
    on_ray = _OnRay(env, Pool(), "a")  # type: ignore[arg-type]
    for key in (KEY, WRONG):
        policy = VersionedPolicy(OpenAIPolicy("tiny", [server.url], api_key=key), "tiny")
        policy.mode = "checkpoint"
        worker.policies.clear()  # the actor builds its client from the spec
        trajectory = await on_ray.rollout(env.tasks(1)[0], policy, Sampling(max_tokens=4))
        for built in worker.policies.values():
            await built.inner.aclose()
        if key == KEY:
            assert trajectory.error is None and trajectory.turns, trajectory.error
        else:
            assert trajectory.error is not None and "401" in trajectory.error.message


def test_eval_with_api_key_env_works_and_writes_no_key(
    server: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VG_CLIENT_KEY", KEY)
    out = tmp_path / "run"
    args = ["eval", "arithmetic", "--base-url", server.url, "--model", "tiny", "-n", "2", "--max-tokens", "8"]
    result = CliRunner().invoke(app, [*args, "--api-key-env", "VG_CLIENT_KEY", "--out", str(out)])
    assert result.exit_code == 0, result.output
    files = [p for p in out.rglob("*") if p.is_file()]
    assert files and not [p for p in files if KEY.encode() in p.read_bytes()]
    keyless = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "keyless")])
    assert keyless.exit_code != 0 and "401" in keyless.output, keyless.output


def test_the_key_is_not_in_the_log(server: Served) -> None:
    server.alive(2.0)
    text = server.log.read_text(errors="replace")
    assert "API key required" in text
    assert KEY not in text and "Traceback" not in text, text[-3000:]
