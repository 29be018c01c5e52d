"""Asynchronous off-policy RL: d = 0 equals the synchronous loop; d ≥ 1 is bounded, versioned, corrected."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from verigym.recipes.quickstart import quickstart_config
from verigym.scale.async_loop import AsyncRLTrainer
from verigym.scale.correction import Correction, correct_rows, staleness_metrics
from verigym.train._model import load_model
from verigym.train.config import TrainConfig
from verigym.train.rl import RLTrainer
from verigym.train.samples import Row

TIMING = ("time", "tokens_per_s", "wait", "wall")


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    # the update runs on a worker thread: pin the thread count so float reductions are the same
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def small_config(out: Path, steps: int = 3) -> TrainConfig:
    # token_cost makes rewards vary with length, so an untrained tiny model gets a gradient
    return quickstart_config(
        out,
        **{
            "rl__steps": steps,
            "rl__groups_per_step": 4,
            "rl__group_size": 4,
            "rl__preset": "grpo",
            "rl__kl_beta": 0.0,
            "rl__token_cost": 0.1,
            "rl__lr": 1e-2,
            "sft__demos": 0,
            "eval__tasks": 4,
        },
    )


def train(cls: type[RLTrainer], cfg: TrainConfig, **kw: Any) -> tuple[RLTrainer, list[dict[str, Any]]]:
    model, tok = load_model(cfg.model)
    trainer = cls(cfg, model=model, tokenizer=tok, **kw)
    return trainer, trainer.train()


def test_staleness_zero_reproduces_the_synchronous_loop_exactly(tmp_path: Path) -> None:
    sync_t, sync = train(RLTrainer, small_config(tmp_path / "sync"))
    async_t, asy = train(AsyncRLTrainer, small_config(tmp_path / "async"), max_staleness=0)
    assert len(sync) == len(asy) == 3
    assert any(abs(m["grad_norm"]) > 0 for m in sync)  # the comparison is not of zeros
    for s, a in zip(sync, asy, strict=True):
        for key, value in s.items():
            if not any(t in key for t in TIMING):
                assert a[key] == value, key  # exactly, not approximately
        assert a["async/staleness_mean"] == 0.0
    for (name, p), q in zip(sync_t.model.named_parameters(), async_t.model.parameters(), strict=True):
        assert torch.equal(p, q), name


def test_staleness_one_runs_ahead_with_known_versions(tmp_path: Path) -> None:
    cfg = small_config(tmp_path / "d1", steps=4)
    trainer, hist = train(AsyncRLTrainer, cfg, max_staleness=1, correction=Correction(tis_cap=2.0))
    assert [m["async/staleness_max"] for m in hist] == [0.0, 1.0, 1.0, 1.0]
    assert all(m["async/samples_unknown_version"] == 0 for m in hist)
    for m in hist[1:]:
        assert m["async/corrected_rows"] == m["samples"]  # every stale sample was corrected
        assert m["async/logprob_gap"] > 0  # one update apart, the policies differ
        assert m["async/staleness/1"] == m["samples"]
    assert trainer.policy.version == 4
    lines = (tmp_path / "d1" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 4 and '"async/staleness/1"' in lines[-1]


def test_correction_caps_token_weights_and_masks_sequences() -> None:
    from verigym.policies import tiny

    tok = tiny.build_tokenizer()
    model = tiny.build_model("tiny", tok, 0).eval()
    ids = list(range(5, 15))
    rows = [Row(ids=list(ids), mask=[0] * 4 + [1] * 6, logprobs=[0.0] * 10) for _ in range(3)]
    # first learn the trainer's logprobs (huge cap, no mask), then build μ around them
    probe = [Row(ids=list(ids), mask=[0] * 4 + [1] * 6, logprobs=[0.0] * 10)]
    correct_rows(
        model, [(probe, 0)], trainer_version=1, correction=Correction(tis_cap=1e9), pad_id=0, temperature=1.0
    )
    prox = probe[0].logprobs
    assert prox is not None
    shifts = [0.0, math.log(4.0), -math.log(4.0)]  # μ = prox − shift: ratio π/μ = e^shift
    for r, shift in zip(rows, shifts, strict=True):
        r.logprobs = [p - shift if m else 0.0 for p, m in zip(prox, r.mask, strict=True)]
    out = correct_rows(
        model,
        [([rows[0]], 1), (rows[1:], 0)],  # the first sample is fresh: left alone
        trainer_version=1,
        correction=Correction(tis_cap=2.0, mask_threshold=3.0),
        pad_id=0,
        temperature=1.0,
    )
    assert rows[0].weights == [1.0] * 10
    w1 = rows[1].weights
    assert w1 is not None
    assert w1[:4] == [1.0] * 4 and all(x == 2.0 for x in w1[4:])  # ratio 4 capped at 2
    w2 = rows[2].weights
    assert w2 is not None
    assert all(abs(x - 0.25) < 1e-4 for x in w2[4:])
    assert rows[1].mask == [0] * 10 and rows[2].mask == [0] * 10  # ratios 4 and 1/4 leave [1/3, 3]
    assert out["async/masked_token_share"] == pytest.approx(12 / 18)
    assert out["async/tis_capped_share"] == pytest.approx(0.5)
    assert out["async/logprob_gap"] == pytest.approx(math.log(4.0), abs=1e-4)


def test_staleness_histogram() -> None:
    m = staleness_metrics([0, 1, 1, 2])
    assert m["async/staleness/1"] == 2 and m["async/staleness_max"] == 2 and m["async/staleness_mean"] == 1.0


def test_cli_rejects_a_negative_async_with_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from verigym.cli import app

    cfg = tmp_path / "c.toml"
    cfg.write_text("[rl]\nsteps = 1\n[scale]\nmask_threshold = 0.5\n")
    bad = CliRunner().invoke(app, ["train", str(cfg)])
    assert bad.exit_code == 2 and "mask_threshold" in bad.output and "Traceback" not in bad.output
    cfg.write_text("[rl]\nsteps = 1\n")
    neg = CliRunner().invoke(app, ["train", str(cfg), "--async", "-1"])
    assert neg.exit_code == 2 and "--async" in neg.output and "Traceback" not in neg.output
