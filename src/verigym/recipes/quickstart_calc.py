"""``verigym quickstart --env calc``: an agent that learns to use a tool, offline on a laptop CPU.

The ``calc`` environment asks for a product of two 3-digit numbers, which the tiny model cannot
compute; it can only succeed by calling the ``calc`` tool with the expression and copying the
tool's result into its answer. Build the ``tiny`` model, SFT it *lightly* on verified tool-using
trajectories of the environment's oracle (stopping at a low held-out pass@1, so only part of the
rollouts are well-formed and correct), then run GRPO (DAPO preset). Held-out pass@1 and the rate
of well-formed tool calls (the ``tool_call_ok`` grader, weight 0) are measured before SFT, after
SFT and after RL, by sampling at the training temperature: a greedy decoder hides the malformed
calls a sampling policy still makes.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from verigym.recipes.quickstart import recipe_config
from verigym.train.config import TrainConfig
from verigym.train.rl import Progress

__all__ = ["STAGES", "calc_quickstart", "calc_quickstart_config"]

STAGES = ("initial", "after_sft", "after_rl")
"""The stages of the summary's ``pass_at_1_STAGE`` and ``tool_call_ok_STAGE`` keys."""


def calc_quickstart_config(
    out_dir: str | Path = "runs/quickstart_calc", *, seed: int = 0, **overrides: Any
) -> TrainConfig:
    """The tool-use quickstart's settings (``overrides`` are dotted keys, e.g. ``{"rl.steps": 10}``)."""
    raw: dict[str, Any] = {
        "seed": seed,
        "out_dir": str(out_dir),
        "model": {"tiny": "tiny", "seed": seed},
        "envs": [{"name": "calc", "args": {"schema": "brief"}}],
        "sampling": {"temperature": 1.0, "max_tokens": 64},
        "sft": {
            "demos": 4000,
            "epochs": 8,
            "batch_size": 32,
            "lr": 3e-3,
            "lr_schedule": "constant",
            "eval_every": 50,
            "target_pass_at_1": 0.1,
        },
        "rl": {
            "preset": "dapo",
            "steps": 60,
            "groups_per_step": 16,
            "group_size": 8,
            "lr": 6e-4,  # 3e-4 lifted seed 2's calls by only +0.05 in 30 steps; 1e-3 broke seed 0's format
            "max_rounds": 1,  # no refill round: it doubled the generation time of every step
            "overlong_buffer": 0.0,  # two turns share max_tokens' budget; no length shaping
            "eval_every": 0,
        },
        "eval": {"tasks": 150, "samples": 1, "temperature": 1.0},
        "logging": {"checkpoint_every": 0},
    }
    return recipe_config(raw, overrides, source="quickstart --env calc")


def calc_quickstart(cfg: TrainConfig | None = None, *, progress: Progress | None = None) -> dict[str, Any]:
    """Run the tool-use quickstart; returns the summary written to ``summary.json``.

    Besides ``pass_at_1_STAGE`` it has ``tool_call_ok_STAGE``: the held-out rate of well-formed
    tool calls at each of ``STAGES``.
    """
    from verigym.train.pipeline import run_train, write_summary

    cfg = cfg or calc_quickstart_config()
    env = cfg.envs[0].name
    t0 = time.perf_counter()
    summary = run_train(cfg, progress=progress)
    summary["wall_s"] = time.perf_counter() - t0
    key = f"eval/{env}/grader/tool_call_ok"
    summary["pass_at_1_after_rl"] = summary.get("pass_at_1_after_rl")
    summary["tool_call_ok_initial"] = summary.get(f"{key}_initial")
    summary["tool_call_ok_after_sft"] = summary.get(f"{key}_after_sft")
    summary["tool_call_ok_after_rl"] = summary.get(key)
    first = [f"{m}_{s}" for m in ("pass_at_1", "tool_call_ok") for s in STAGES]
    ordered = {k: summary.get(k) for k in (*first, "sft_steps", "steps", "wall_s")}
    ordered.update({k: v for k, v in summary.items() if k not in ordered})
    write_summary(cfg.out_dir, ordered)  # with run_train's run header
    return ordered
