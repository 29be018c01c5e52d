"""RL presets as data: each a table of ``rl`` keys that a config's ``[rl]`` keys override
(``train.config.build_config``), and the ``verigym train --preset`` help made from them.

Importing this module loads nothing heavy (the CLI builds its help from it). What each preset
sets, with its paper, is in ``train.config``'s notes; a new preset is one entry here (and a line in
those notes and the README, which ``tests/train/test_presets_listed.py`` checks).
"""

from __future__ import annotations

from typing import Any

__all__ = ["PRESETS", "PRESET_HINTS", "preset_help"]

_DAPO: dict[str, Any] = {
    "advantage": "grpo",
    "eps_low": 0.2,
    "eps_high": 0.28,
    "dynamic_sampling": True,
    "aggregation": "token-mean",
    "overlong_buffer": 0.2,
    "kl_beta": 0.0,
}

PRESETS: dict[str, dict[str, Any]] = {
    "grpo": {
        "advantage": "grpo",
        "scale_rewards": "group",
        "aggregation": "seq-mean-token-mean",
        "kl_beta": 0.04,
    },
    "dr_grpo": {"advantage": "dr_grpo", "aggregation": "seq-mean-token-sum-norm", "kl_beta": 0.0},
    "dapo": dict(_DAPO),
    "opo": {
        "advantage": "opo",
        "num_iterations": 1,
        "minibatches": 1,
        "aggregation": "token-mean",
        "kl_beta": 0.0,
    },
    "skywork": {"adaptive_entropy": True, "aggregation": "token-mean", "kl_beta": 0.0},
    "lead": {"lead_length_reward": True, "lead_difficulty": True, "kl_beta": 0.0},
    "clip_cov": {"loss": "clip_cov", "aggregation": "token-mean", "kl_beta": 0.0},
    "kl_cov": {"loss": "kl_cov", "aggregation": "token-mean", "kl_beta": 0.0},
    "gspo": {
        "loss": "gspo",
        "eps_low": 3e-4,
        "eps_high": 4e-4,
        "aggregation": "seq-mean-token-mean",
        "kl_beta": 0.0,
    },
    # DAPO + on-policy distillation (name a teacher) at the balance benchmarks/distill.py measured best
    # of those that use the teacher: coefficient 1 decaying to 0 along a cosine beside the full
    # verified advantage (it tied RL alone on the tiny task, 0.553 vs 0.553, with the smallest spread)
    "opd": {**_DAPO, "distill": {"coef": 1.0, "schedule": "cosine", "final_coef": 0.0}},
}
"""Every RL preset by name, in the order the help lists them."""

PRESET_HINTS: dict[str, str] = {"opd": "DAPO + on-policy distillation; set rl.distill.teacher"}
"""What the ``--preset`` help adds after a preset's name (for presets that need more than the name)."""


def preset_help() -> str:
    """The ``verigym train --preset`` help: every preset's name, with its hint where it has one."""
    names = [f"{n} ({PRESET_HINTS[n]})" if n in PRESET_HINTS else n for n in PRESETS]
    return f"RL preset: {', '.join(names)}."
