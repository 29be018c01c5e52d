"""Exact resume: a run that crashes after a checkpoint and is resumed logs the same metrics and ends
with the same weights as an uninterrupted run with the same seed (CPU)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from verigym.envs.builtin.arithmetic import ArithmeticEnv
from verigym.envs.registry import register_env
from verigym.record import FORMAT_VERSION, read_run
from verigym.rubric import Grader, Rubric
from verigym.train._model import load_model
from verigym.train.config import ConfigError, build_config
from verigym.train.monitor import read_metrics
from verigym.train.report import write_report
from verigym.train.rl import RLTrainer
from verigym.types import Task, Trajectory

torch.set_num_threads(1)


def _digit_share(task: Task, trajectory: Trajectory) -> float:
    text = trajectory.final_text
    return sum(c.isdigit() for c in text) / len(text) if text else 0.0


def _digits_env() -> ArithmeticEnv:
    """Arithmetic prompts, rewarded by the share of digits in the reply: a dense signal even for a
    random model, so every step has non-zero advantages to train on."""
    env = ArithmeticEnv(level=1, size=64)
    env.rubric = Rubric([Grader(_digit_share, name="digits")])
    return env


register_env("digits-test", _digits_env)


class Crash(Exception):
    pass


_VOLATILE = ("time_s", "tokens_per_s")


def _stable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if not k.endswith(_VOLATILE)} for r in rows if r.get("phase") == "rl"]


def _cfg(out: Path) -> Any:
    return build_config(
        {
            "seed": 3,
            "out_dir": str(out),
            "envs": [{"name": "digits-test"}],
            "sampling": {"max_tokens": 4},
            "rl": {
                "preset": "grpo",  # k3 KL to a frozen reference: the reference must survive the resume
                "steps": 4,
                "groups_per_step": 3,
                "group_size": 4,
                "num_iterations": 2,
                "minibatches": 2,
                "lr": 5e-3,
            },
            "eval": {"tasks": 8},
            "logging": {"checkpoint_every": 2},
        }
    )


def test_resume_after_crash_equals_uninterrupted_run(tmp_path: Path) -> None:
    cfg_a = _cfg(tmp_path / "a")
    model, tok = load_model(cfg_a.model)
    trainer_a = RLTrainer(cfg_a, model=model, tokenizer=tok)
    trainer_a.train()

    cfg_b = _cfg(tmp_path / "b")
    model_b, tok_b = load_model(cfg_b.model)

    def crash(event: str, info: dict[str, Any]) -> None:
        if event == "checkpoint" and info["step"] == 2:
            raise Crash

    with pytest.raises(Crash):
        RLTrainer(cfg_b, model=model_b, tokenizer=tok_b, progress=crash).train()
    assert len(_stable(read_metrics(tmp_path / "b" / "metrics.jsonl"))) == 2
    resumed = RLTrainer.resume(tmp_path / "b")
    assert resumed.step == 2
    resumed.train()

    a = _stable(read_metrics(tmp_path / "a" / "metrics.jsonl"))
    b = _stable(read_metrics(tmp_path / "b" / "metrics.jsonl"))
    assert [r["step"] for r in b] == [0, 1, 2, 3]
    assert a == b
    assert any(r["kl"] > 0 for r in a[1:]) and all(r["samples"] == 12 for r in a)
    for (name, p), (_, q) in zip(
        trainer_a.model.named_parameters(), resumed.model.named_parameters(), strict=True
    ):
        assert torch.equal(p, q), name

    report = write_report(tmp_path / "a", summary={"steps": 4})
    html = report.read_text()
    assert "<img" in html and "Entropy law" in html
    assert json.loads((tmp_path / "a" / "train_config.json").read_text())["rl"]["preset"] == "grpo"


@pytest.mark.parametrize(
    "preset", ["grpo", "dr_grpo", "dapo", "opo", "skywork", "lead", "clip_cov", "kl_cov", "gspo"]
)
def test_every_preset_runs_a_step(tmp_path: Path, preset: str) -> None:
    import math

    cfg = build_config(
        {
            "out_dir": str(tmp_path),
            "envs": [{"name": "digits-test"}],
            "sampling": {"max_tokens": 4},
            "rl": {"preset": preset, "steps": 2, "groups_per_step": 2, "group_size": 4, "num_iterations": 2},
            "logging": {"report": False},
        }
    )
    model, tok = load_model(cfg.model)
    trainer = RLTrainer(cfg, model=model, tokenizer=tok)
    before = [p.detach().clone() for p in model.parameters()]
    history = trainer.train()
    assert [h["step"] for h in history] == [0, 1]
    assert all(math.isfinite(h["loss"]) and math.isfinite(h["grad_norm"]) for h in history if "loss" in h)
    changed = any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert changed == any(
        h.get("adv_abs_mean", 0.0) > 0 for h in history
    )  # lead: no correct sample, no signal


def test_checkpoints_keep_what_resume_needs_once(tmp_path: Path) -> None:
    """Only the newest checkpoint keeps the optimizer state; the one before keeps its weights; the KL
    reference is written once; the final model is the last checkpoint's files hard-linked; a finished
    run resumes with a larger step budget."""
    from verigym.train.checkpoint import disk_usage
    from verigym.train.pipeline import run_train

    cfg = _cfg(tmp_path / "run")
    cfg.rl.steps, cfg.logging.checkpoint_every, cfg.logging.report = 3, 1, False
    summary = run_train(cfg)
    run = read_run(tmp_path / "run")  # the run record: run.json, summary.json with the header
    assert run.kind == "train" and run.finished and run.header is not None and run.header.wall_s
    assert run.header.config["rl"]["steps"] == 3 and run.header.seeds["seed"] == cfg.seed
    assert run.summary is not None and run.summary.model_dump()["steps"] == summary["steps"] == 3
    assert "run" not in summary and len(run.metrics()) == len(
        read_metrics(tmp_path / "run" / "metrics.jsonl")
    )
    root = tmp_path / "run" / "checkpoints"
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == ["ref", "step_000002", "step_000003"]
    assert (root / "step_000003" / "trainer.pt").is_file()
    assert not (root / "step_000002" / "trainer.pt").exists() and (root / "step_000002" / "model").is_dir()
    assert not any((p / "ref").exists() for p in root.glob("step_*"))
    final = Path(summary["model_dir"])
    for f in (root / "step_000003" / "model").iterdir():
        assert (final / f.name).stat().st_ino == f.stat().st_ino, f.name
    usage = disk_usage(tmp_path / "run", final)
    assert usage["model_mb"] == summary["model_mb"] and usage["resume_state_mb"] == summary["resume_state_mb"]
    files = [p for p in (tmp_path / "run").rglob("*") if p.is_file()]
    assert usage["run_dir_mb"] < sum(p.stat().st_size for p in files) / 1e6  # linked files counted once

    future = json.loads((tmp_path / "run" / "run.json").read_text()) | {"format_version": FORMAT_VERSION + 1}
    (tmp_path / "future").mkdir()
    (tmp_path / "future" / "run.json").write_text(json.dumps(future))
    with pytest.raises(ConfigError, match=r"^--resume: .*run.json: format_version .* is newer than"):
        run_train(cfg, resume=tmp_path / "future")

    resumed = RLTrainer.resume(tmp_path / "run", steps=4)
    assert resumed.step == 3 and resumed.ref_model is not None
    resumed.train()
    assert resumed.step == 4 and (root / "step_000004" / "trainer.pt").is_file()
    assert not (root / "step_000003" / "trainer.pt").exists() and not (root / "step_000002").exists()
    # the final model of the first run was linked, not shared in place: it is still there, whole
    assert (final / "config.json").is_file()
