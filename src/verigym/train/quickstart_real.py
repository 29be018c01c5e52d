"""``verigym quickstart --model NAME``: the seeds' recipe on a real pretrained model, offline on a CPU.

"Imitate first, then explore": a light SFT on verified oracle demonstrations rendered in the model's
own chat template (its tokenizer, its EOS), stopped at a held-out target so RL has room, then GRPO
with the DAPO preset on the same environment, then held-out greedy pass@1 again. The summary has
the tiny quickstart's keys (``pass_at_1_initial``, ``pass_at_1_after_sft``, ``pass_at_1_after_rl``).

The task is 3-digit addition and subtraction (``arithmetic`` level 3) asked in words with a
``\\boxed{}`` answer: SmolLM2-135M-Instruct gets 2-digit addition wrong greedily (``"20 + 41 = 62"``)
but one light SFT nearly solves it (0.70 after 10 steps), which leaves RL nothing to do; level 3 keeps
answers short (a few tokens) and hard enough to leave room.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verigym.train.config import TrainConfig, apply_overrides, build_config

__all__ = ["real_quickstart_config"]


def real_quickstart_config(
    out_dir: str | Path, *, model: str, seed: int = 0, **overrides: Any
) -> TrainConfig:
    """The real-model quickstart's settings (``overrides``: dotted keys with ``__``, e.g. ``rl__steps=10``)."""
    raw: dict[str, Any] = {
        "seed": seed,
        "out_dir": str(out_dir),
        "model": {"path": model, "tiny": None, "seed": seed, "dtype": "float32"},
        "envs": [{"name": "arithmetic", "args": {"level": 3, "verbose": True}}],
        "sampling": {"temperature": 1.0, "max_tokens": 16},
        "sft": {
            "demos": 256,
            "max_steps": 32,
            "batch_size": 8,
            "lr": 3e-5,
            "lr_schedule": "constant",
            "eval_every": 4,
            "target_pass_at_1": 0.15,
        },
        "rl": {
            "preset": "dapo",
            "steps": 40,
            "groups_per_step": 4,
            "group_size": 8,
            "lr": 1e-5,
            "max_rounds": 1,
            "eval_every": 0,
        },
        "eval": {"tasks": 100, "samples": 1, "temperature": 0.0},
        "logging": {"checkpoint_every": 0},
    }
    return build_config(
        apply_overrides(raw, {k.replace("__", "."): v for k, v in overrides.items()}),
        source=f"quickstart --model {model}",
    )
