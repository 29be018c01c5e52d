"""``verigym quickstart --model NAME``: the seeds' recipe on a real pretrained model, offline on a CPU.

"Imitate first, then explore": a light SFT on verified oracle demonstrations rendered in the model's
own chat template (its tokenizer, its EOS), stopped at a held-out target so RL has room, then GRPO
with the DAPO preset on the same environment, then held-out greedy pass@1 again. The summary has
the tiny quickstart's keys (``pass_at_1_initial``, ``pass_at_1_after_sft``, ``pass_at_1_after_rl``).

The task is 2-digit addition and subtraction (``arithmetic`` level 2) asked in words with a
``\\boxed{}`` answer, the answer given directly in a few tokens. SmolLM2-135M-Instruct gets it wrong
greedily (``"20 + 41 = 62"``); SFT is stopped at held-out pass@1 0.3 (about 20 steps), which leaves
room. RL samples 8 groups of 8 per step with a second sampling round that replaces the groups DAPO's
dynamic sampling drops (all right or all wrong): with 4 groups and no refill a step trained on one
or two groups and held-out pass@1 moved by +0.04 to +0.07 in 30-60 steps; lr 3e-5 collapsed the
policy (entropy to ~0, pass@1 0.05). Measured figures: ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verigym.recipes.quickstart import recipe_config
from verigym.train.config import TrainConfig

__all__ = ["real_calc_config", "real_quickstart_config"]


def real_quickstart_config(
    out_dir: str | Path, *, model: str, seed: int = 0, **overrides: Any
) -> TrainConfig:
    """The real-model quickstart's settings (``overrides``: dotted keys with ``__``, e.g. ``rl__steps=10``)."""
    raw: dict[str, Any] = {
        "seed": seed,
        "out_dir": str(out_dir),
        "model": {"path": model, "tiny": None, "seed": seed, "dtype": "float32"},
        "envs": [{"name": "arithmetic", "args": {"level": 2, "verbose": True}}],
        "sampling": {"temperature": 1.0, "max_tokens": 16},
        "sft": {
            "demos": 256,
            "max_steps": 32,
            "batch_size": 8,
            "lr": 3e-5,
            "lr_schedule": "constant",
            "eval_every": 4,
            "target_pass_at_1": 0.3,
            "target_greedy": True,  # the stop measured in RESULTS: greedy 0.3 (sampled pass@1 ~0.23)
        },
        "rl": {
            "preset": "dapo",
            "steps": 40,
            "groups_per_step": 8,
            "group_size": 8,
            "lr": 1e-5,
            "max_rounds": 2,  # refill: a second sampling round replaces the groups dynamic sampling drops
            "packing": True,  # 1.4x faster updates on these short answers, same loss (train.packing)
            "eval_every": 0,
        },
        # pass@1 at the sampling temperature, 4 samples a task (Chen et al. 2021; DeepSeek-R1 reports
        # pass@1 so): greedy decoding hides how much mass RL moves; learning.py reports greedy beside it
        "eval": {"tasks": 100, "samples": 4, "temperature": 1.0},
        "logging": {"checkpoint_every": 0},
    }
    return recipe_config(raw, overrides, source=f"quickstart --model {model}")


def real_calc_config(out_dir: str | Path, *, model: str, seed: int = 0, **overrides: Any) -> TrainConfig:
    """The tool-use recipe (``quickstart --env calc --model NAME``) on a real pretrained model.

    ``calc`` asks for a product of two 3-digit numbers, which SmolLM2-135M cannot compute: it must
    call the ``calc`` tool in its own tool-call format (the schemas are written into the system prompt
    when its chat template ignores ``tools``) and copy the result. The base model never emits a call;
    a fixed light SFT (6 steps) on the oracle's trajectories in the model's template teaches the format
    and leaves held-out pass@1 low, then DAPO. Held-out pass@1 and the well-formed-call rate (``tool_call_ok``) are
    measured by sampling at the training temperature, as in the tiny tool-use quickstart.

    Measured on 2 shared CPU cores (``benchmarks/learning.py --model smollm2-135m-instruct --env calc``,
    ``benchmarks/RESULTS.md``): 4 groups × 8 two-turn episodes a step (a ~250-token prompt with the
    tool schema, ~45 generated tokens) take ~50–110 s, and 12 steps lift held-out pass@1 and the
    well-formed-call rate from ~0.2 to ~0.9. An earlier 8-group recipe took 175–430 s a step.
    """
    raw: dict[str, Any] = {
        "seed": seed,
        "out_dir": str(out_dir),
        "model": {"path": model, "tiny": None, "seed": seed, "dtype": "float32"},
        "envs": [{"name": "calc", "args": {"verbose": True}}],
        "sampling": {"temperature": 1.0, "max_tokens": 48},  # both turns share it
        # a fixed light SFT: on seed 0 held-out pass@1 / well-formed calls were 0.00 / 0.00 after 4 steps
        # and 0.48 / 0.58 after 8 (T = 1, 50 tasks); held-out checks of two-turn tool episodes cost
        # minutes each on 2 cores, so no stopping check
        "sft": {"demos": 256, "max_steps": 6, "batch_size": 8, "lr": 1e-5, "lr_schedule": "constant"},
        "rl": {
            "preset": "dapo",
            "steps": 12,
            "groups_per_step": 4,
            "group_size": 8,
            "lr": 1e-5,
            "max_rounds": 2,
            "overlong_buffer": 0.0,  # two turns share max_tokens' budget; no length shaping
            "packing": True,
            "eval_every": 0,
        },
        "eval": {"tasks": 100, "samples": 1, "temperature": 1.0},
        "logging": {"checkpoint_every": 0},
    }
    return recipe_config(raw, overrides, source=f"quickstart --env calc --model {model}")
