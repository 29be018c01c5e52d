"""Data: verified rollouts into training sets, and tasks sized for training.

- ``rejection``: rejection sampling (keep the verified rollouts) and SFT lines (``select_verified``,
  ``write_sft``);
- ``difficulty``: per-task pass rates and variance ranking (``Profile``, ``rank_by_variance``);
- ``synthesis``: new tasks from old (rewrites, numeric inversion, SvS variants, tool tasks);
- ``workflow``: ``verigym profile`` and ``verigym synth`` as library calls, ``profile(env, model, ...)``
  and ``synthesize(env, model, ...)`` (and ``aprofile``/``asynthesize``): an eval, then its records
  profiled or kept as SFT data (``ProfileResult``, ``SynthResult``).

Names are imported when first asked for, so ``import verigym.data`` loads nothing but this file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from verigym._lazy import lazy_getattr

if TYPE_CHECKING:
    from verigym.data.difficulty import Profile, TaskStats, rank_by_variance
    from verigym.data.rejection import RejectionStats, jaccard, select_verified, sft_line, write_sft
    from verigym.data.synthesis import (
        REWRITE_PROMPTS,
        SolveRate,
        invert_numeric,
        rewrite,
        svs_variants,
        synthesize_tool_tasks,
    )
    from verigym.data.workflow import (
        ProfileResult,
        SynthResult,
        aprofile,
        asynthesize,
        profile,
        synthesize,
    )

__getattr__ = lazy_getattr(
    __name__,
    {
        "Profile": ".difficulty",
        "TaskStats": ".difficulty",
        "rank_by_variance": ".difficulty",
        "RejectionStats": ".rejection",
        "jaccard": ".rejection",
        "select_verified": ".rejection",
        "sft_line": ".rejection",
        "write_sft": ".rejection",
        "REWRITE_PROMPTS": ".synthesis",
        "SolveRate": ".synthesis",
        "invert_numeric": ".synthesis",
        "rewrite": ".synthesis",
        "svs_variants": ".synthesis",
        "synthesize_tool_tasks": ".synthesis",
        "ProfileResult": ".workflow",
        "SynthResult": ".workflow",
        "aprofile": ".workflow",
        "asynthesize": ".workflow",
        "profile": ".workflow",
        "synthesize": ".workflow",
    },
)

__all__ = [
    "REWRITE_PROMPTS",
    "Profile",
    "ProfileResult",
    "RejectionStats",
    "SolveRate",
    "SynthResult",
    "TaskStats",
    "aprofile",
    "asynthesize",
    "invert_numeric",
    "jaccard",
    "profile",
    "rank_by_variance",
    "rewrite",
    "select_verified",
    "sft_line",
    "svs_variants",
    "synthesize",
    "synthesize_tool_tasks",
    "write_sft",
]
