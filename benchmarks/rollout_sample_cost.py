"""What the trainer's rollout sample for ``verigym view`` costs (``train.rollouts``, ``logging.rollout_groups``).

Trains the quickstart's RL shape (the tiny model on 2-digit addition, 16 groups of 8 a step; Dr. GRPO, so an
untrained model's flat groups are kept and every step has 16 groups to sample from) from a
fresh model for ``--steps`` steps, once per ``--groups`` value, and reports per step: the time spent
writing ``rollouts_sample.jsonl`` (the extra no-grad forward over the kept rows, decoding their tokens,
the JSON line), that time as a share of the step, and the file's bytes a step. The same seed on each
side, so the rollouts are the same; ``0`` is the trainer without the sample.

    python benchmarks/rollout_sample_cost.py [--steps 20] [--groups 0,2,16] [--model tiny|smollm2-135m-instruct]

``--model smollm2-135m-instruct`` measures a real 135M model (its own chat template, 32 max tokens).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from verigym.train import load_model
from verigym.train import rollouts as rollouts_mod
from verigym.train.config import build_config
from verigym.train.rl import RLTrainer


def run(groups: int, steps: int, model: str, out: Path) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "seed": 0,
        "out_dir": str(out),
        "model": {"tiny": "tiny", "seed": 0} if model == "tiny" else {"path": model},
        "envs": [{"name": "arithmetic", "args": {"level": 1}}],
        "sampling": {"temperature": 1.0, "max_tokens": 6 if model == "tiny" else 32},
        "rl": {"preset": "dr_grpo", "steps": steps, "groups_per_step": 16, "group_size": 8},
        "logging": {"rollout_groups": groups, "report": False},
    }
    cfg = build_config(raw)
    net, tok = load_model(cfg.model)
    spent: list[float] = []
    original = rollouts_mod.RolloutSample.write

    def timed(self: Any, *args: Any, **kw: Any) -> None:
        t0 = time.perf_counter()
        original(self, *args, **kw)
        spent.append(time.perf_counter() - t0)

    rollouts_mod.RolloutSample.write = timed  # type: ignore[method-assign]
    try:
        history = RLTrainer(cfg, model=net, tokenizer=tok).train()
    finally:
        rollouts_mod.RolloutSample.write = original  # type: ignore[method-assign]
    step_s = [float(r["step_time_s"]) for r in history]
    path = out / rollouts_mod.ROLLOUTS_FILE
    size = path.stat().st_size if path.is_file() else 0
    return {
        "groups": groups,
        "step_s": statistics.median(step_s),
        "write_ms": 1000 * statistics.median(spent) if spent else 0.0,
        "share": (statistics.median(spent) / statistics.median(step_s)) if spent else 0.0,
        "bytes_per_step": size / max(1, len(history)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--groups", default="0,2,16")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        for g in [int(x) for x in args.groups.split(",")]:
            r = run(g, args.steps, args.model, Path(tmp) / f"g{g}")
            print(
                f"rollout_groups={g:>2}: step {r['step_s'] * 1000:7.1f} ms (median), writing the sample "
                f"{r['write_ms']:6.1f} ms ({r['share']:.1%} of a step), {r['bytes_per_step'] / 1024:6.1f} KiB a step"
            )


if __name__ == "__main__":
    main()
