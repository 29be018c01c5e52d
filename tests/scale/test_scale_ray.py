"""Ray: a local instance (2 CPUs) grades the RL producer's groups; results equal the in-process run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from verigym.recipes.quickstart import quickstart_config
from verigym.scale.ray_backend import RAY_MISSING, RayMissingError, require_ray, use_ray
from verigym.train import load_model
from verigym.train.rl import RLTrainer

TIMING = ("time", "tokens_per_s", "wait", "wall")


def _run(out: Path, *, ray: bool) -> tuple[list[dict[str, float]], int]:
    torch.set_num_threads(1)
    cfg = quickstart_config(
        out,
        **{
            "rl__steps": 2,
            "rl__groups_per_step": 3,
            "rl__group_size": 4,
            "rl__preset": "grpo",
            "rl__kl_beta": 0.0,
            "rl__token_cost": 0.1,
            "sft__demos": 0,
            "eval__tasks": 4,
        },
    )
    model, tok = load_model(cfg.model)
    trainer = RLTrainer(cfg, model=model, tokenizer=tok)
    pool = use_ray(trainer, num_cpus=2, workers=2, max_inflight=2) if ray else None
    try:
        return trainer.train(), 0 if pool is None else pool.calls
    finally:
        if pool is not None:
            pool.shutdown()


def test_ray_graders_give_the_in_process_results(tmp_path: Path) -> None:
    ray = require_ray()
    try:
        local, _ = _run(tmp_path / "local", ray=False)
        remote, calls = _run(tmp_path / "ray", ray=True)
    finally:
        ray.shutdown()
    assert calls == 6  # one grading call per group, 3 groups x 2 steps
    for a, b in zip(local, remote, strict=True):
        assert {k: v for k, v in a.items() if not any(t in k for t in TIMING)} == {
            k: v for k, v in b.items() if not any(t in k for t in TIMING)
        }


def test_without_ray_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(RayMissingError) as err:
        require_ray()
    assert str(err.value) == RAY_MISSING and "pip install 'verigym[ray]'" in RAY_MISSING
