"""RL against a real ``verigym serve`` subprocess: weights pushed as LoRA adapters or full checkpoints,
every sample's version known; failed pushes retried."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import torch

from verigym.policies import tiny
from verigym.recipes.quickstart import quickstart_config
from verigym.scale.async_loop import AsyncRLTrainer
from verigym.scale.correction import Correction
from verigym.scale.remote import RemoteSampler, WeightPushError
from verigym.serve import spawn_server
from verigym.train import load_model
from verigym.train.config import TrainConfig

KEY = "vg-remote-test-key"  # the server wants it (--api-key-env); the sampler sends it


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    base = tiny.create("tiny", tmp_path_factory.mktemp("base") / "tiny", seed=0)
    pushes = str(tmp_path_factory.getbasetemp())  # every test's push_dir lies under it
    proc, url = spawn_server(
        str(base), "--name", "base", "--allow-adapter-loading", pushes, timeout_s=90, api_key=KEY
    )
    try:
        yield url, base
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def config(out: Path, base: Path, *, lora: bool) -> TrainConfig:
    over = {
        "model__path": str(base),
        "rl__steps": 3,
        "rl__groups_per_step": 3,
        "rl__group_size": 4,
        "rl__preset": "grpo",
        "rl__kl_beta": 0.0,
        "rl__token_cost": 0.1,
        "rl__lr": 1e-2,
        "sft__demos": 0,
        "eval__tasks": 4,
    }
    if lora:
        over["model__lora"] = {"r": 4, "alpha": 8}
    return quickstart_config(out, **over)


def run(cfg: TrainConfig, sampler: RemoteSampler, d: int) -> tuple[AsyncRLTrainer, list[dict[str, float]]]:
    torch.set_num_threads(1)
    model, tok = load_model(cfg.model)
    trainer = AsyncRLTrainer(
        cfg,
        model=model,
        tokenizer=tok,
        max_staleness=d,
        correction=Correction(correct_fresh=True),
        sampler=sampler,
    )
    return trainer, trainer.train()


def test_lora_adapters_are_pushed_and_versions_read_off_the_server(
    server: tuple[str, Path], tmp_path: Path
) -> None:
    url, base = server
    sampler = RemoteSampler([url], push_dir=tmp_path / "push", api_key=KEY)
    _, hist = run(config(tmp_path / "run", base, lora=True), sampler, d=1)
    assert sampler.policy.mode == "lora" and sampler.pushes == 4  # v0 at start + one per step
    assert [m["async/staleness_max"] for m in hist] == [0.0, 1.0, 1.0]
    assert all(m["async/samples_unknown_version"] == 0 and m["samples_errored"] == 0 for m in hist)
    # same fp32 weights in two processes: the sampler's logprobs are the trainer's, token for token
    assert hist[0]["async/logprob_gap"] < 1e-4
    assert hist[1]["async/logprob_gap"] > hist[0]["async/logprob_gap"]  # one version stale
    models = {
        m["id"] for m in httpx.get(url + "/models", headers={"Authorization": f"Bearer {KEY}"}).json()["data"]
    }
    assert models == {"base"}  # every pushed adapter was unloaded at the end of the run (issue 14)


def test_full_checkpoints_are_reloaded_by_the_server(server: tuple[str, Path], tmp_path: Path) -> None:
    url, base = server
    sampler = RemoteSampler([url], push_dir=tmp_path / "push", api_key=KEY)
    trainer, hist = run(config(tmp_path / "run", base, lora=False), sampler, d=0)
    assert sampler.policy.mode == "checkpoint" and trainer.policy.version == 3
    # on policy through the server: the trainer recomputes the sampler's logprobs (float round-off only)
    assert all(m["async/staleness_max"] == 0 and m["async/logprob_gap"] < 1e-4 for m in hist)
    assert sampler.version == 2  # v3 is published after the last step; nothing samples from it


async def test_failed_pushes_are_retried_then_fail_loudly(tmp_path: Path) -> None:
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request.url.path)
        if len(calls) <= 2:
            return httpx.Response(503, text="busy")
        if request.url.path == "/update_weights_from_disk":
            return httpx.Response(404, text="no such endpoint")
        return httpx.Response(200, text="ok")

    s = RemoteSampler(
        ["http://srv:1/v1"], push_dir=tmp_path, backoff_s=0.0, transport=httpx.MockTransport(handler)
    )
    await s._post_all("/v1/load_lora_adapter", {"lora_name": "x-v1", "lora_path": "/p"})
    assert calls == ["/v1/load_lora_adapter"] * 3 and s.push_retries == 2
    with pytest.raises(WeightPushError, match="404"):
        await s._post_all("/update_weights_from_disk", {"model_path": "/p", "version": 1})
    assert len(calls) == 4  # a 404 is not retried
    await asyncio.sleep(0)
