"""``sft.target_greedy`` and ``RLTrainer.evaluate(greedy=True)``: the held-out check that stops SFT can
decode greedily while ``[eval]`` samples (the real-model recipe reports pass@1 at T = 1 but stops SFT
at greedy 0.3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from verigym.policies import tiny
from verigym.train import rl as rl_module
from verigym.train.config import build_config
from verigym.train.pipeline import run_train
from verigym.train.rl import RLTrainer


def _cfg(tmp_path: Path, **sft: Any) -> Any:
    return build_config(
        {
            "out_dir": str(tmp_path / "run"),
            "model": {"tiny": "tiny"},
            "envs": [{"name": "arithmetic"}],
            "sampling": {"max_tokens": 4},
            "sft": {"demos": 8, "max_steps": 2, "batch_size": 4, "eval_every": 1, **sft},
            "rl": {"steps": 1, "groups_per_step": 2, "group_size": 2},
            "eval": {"tasks": 2, "samples": 3, "temperature": 1.0},
            "logging": {"checkpoint_every": 0},
        }
    )


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[tuple[float, int]]:
    calls: list[tuple[float, int]] = []
    real = rl_module.evaluate  # type: ignore[attr-defined]

    async def spy(env: Any, policy: Any, tasks: Any, *, sampling: Any, samples: int, **rest: Any) -> Any:
        calls.append((sampling.temperature, samples))
        return await real(env, policy, tasks, sampling=sampling, samples=samples, **rest)

    monkeypatch.setattr(rl_module, "evaluate", spy)
    return calls


def test_greedy_evaluate_overrides_the_eval_sampling(tmp_path: Path, seen: list[tuple[float, int]]) -> None:
    tok = tiny.build_tokenizer()
    trainer = RLTrainer(_cfg(tmp_path), model=tiny.build_model("tiny", tok, seed=0), tokenizer=tok)
    trainer.evaluate(greedy=True)
    trainer.evaluate()
    assert seen == [(0.0, 1), (1.0, 3)]


def test_the_sft_stopping_check_decodes_greedily(tmp_path: Path, seen: list[tuple[float, int]]) -> None:
    run_train(_cfg(tmp_path, target_pass_at_1=1.0, target_greedy=True))
    # initial eval, two SFT checks, the after-SFT eval, the final eval: only the SFT checks are greedy
    assert seen == [(1.0, 3), (0.0, 1), (0.0, 1), (1.0, 3), (1.0, 3)]


def test_the_final_eval_runs_without_adams_moments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Training over (its checkpoints hold the optimizer), AdamW's moments — twice the trainable
    weights, ~1 GB on SmolLM2 — are dropped before the final eval (issue 43 item 2)."""
    trainers: list[RLTrainer] = []
    held: list[int | None] = []
    at_finish: list[int] = []
    real_eval, real_finish = rl_module.evaluate, RLTrainer.finish_training  # type: ignore[attr-defined]

    async def spy(*args: Any, **kwargs: Any) -> Any:
        held.append(len(trainers[0].state.optimizer.state) if trainers else None)
        return await real_eval(*args, **kwargs)

    def finish(self: RLTrainer) -> None:
        at_finish.append(len(self.state.optimizer.state))
        real_finish(self)

    monkeypatch.setattr(rl_module, "evaluate", spy)
    monkeypatch.setattr(RLTrainer, "finish_training", finish)
    summary = run_train(_cfg(tmp_path), on_trainer=trainers.append)
    assert at_finish and at_finish[0] > 0  # the RL step made them
    assert held[-1] == 0 and summary["pass_at_1_after_rl"] is not None
