"""A train run that dies during SFT, or after SFT but before its first RL checkpoint, resumes with
``verigym train --resume RUN`` (issue 14); a resumed run's summary keeps the pre-RL figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from verigym.train.config import build_config
from verigym.train.pipeline import run_train

KEPT = ("pass_at_1_initial", "pass_at_1_after_sft", "sft_steps", "sft_model_dir")


class Crash(Exception):
    pass


def cfg(out: Path, checkpoint_every: int = 0) -> Any:
    return build_config(
        {
            "seed": 1,
            "out_dir": str(out),
            "envs": [{"name": "arithmetic", "args": {"level": 1}}],
            "sampling": {"max_tokens": 4},
            "sft": {"demos": 16, "max_steps": 3, "batch_size": 8},
            "rl": {"preset": "dapo", "steps": 3, "groups_per_step": 2, "group_size": 4},
            "eval": {"tasks": 4},
            "logging": {"report": False, "checkpoint_every": checkpoint_every},
        }
    )


def crash_on(event_name: str, step: int) -> Any:
    def progress(event: str, info: dict[str, Any]) -> None:
        if event == event_name and info.get("step") == step:
            raise Crash

    return progress


def stable(summary: dict[str, Any]) -> dict[str, Any]:
    paths = ("wall_s", "model_dir", "sft_model_dir", "model_files_shared_with", "run_dir_mb")
    record = ("format_version", "run")  # summary.json's run record (issue 40): times and paths of the run
    return {k: v for k, v in summary.items() if k not in paths + record}


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    torch.set_num_threads(1)
    return run_train(cfg(tmp_path_factory.mktemp("a") / "run"))


@pytest.mark.parametrize(
    ("event", "step", "every"), [("sft_step", 2, 0), ("step", 1, 0), ("checkpoint", 1, 1)]
)
def test_resume_after_a_crash_finishes_like_an_uninterrupted_run(
    tmp_path: Path, uninterrupted: dict[str, Any], event: str, step: int, every: int
) -> None:
    torch.set_num_threads(1)
    run = tmp_path / "run"
    with pytest.raises(Crash):
        run_train(cfg(run, every), progress=crash_on(event, step))
    assert not (run / "summary.json").exists()
    summary = run_train(cfg(tmp_path / "ignored"), resume=run)  # the run's own config is used
    saved = json.loads((run / "summary.json").read_text())
    assert all(k in saved for k in KEPT), saved
    assert saved["sft_model_dir"] == str(run / "sft")
    assert stable(saved) == stable(summary)
    assert saved["steps"] == 3
    if every == 0:  # redone from the start: the same figures as a run that never crashed
        assert stable(saved) == stable(uninterrupted)
    else:
        for k in ("pass_at_1_initial", "pass_at_1_after_sft", "sft_steps"):
            assert saved[k] == uninterrupted[k]
