"""Training: a light SFT warm-up, then RL with the GRPO family and the seed lectures' recipes.

- ``config``: the TOML config; ``presets``: the RL presets as data (grpo, dr_grpo, dapo, opo, skywork,
  lead, clip_cov, kl_cov, gspo, opd), from which ``verigym train --preset``'s help is made.
- ``distill``: on-policy distillation (a teacher scores the student's samples; ``[rl.distill]``).
- ``advantages`` / ``losses`` / ``shaping``: the pure numerics (advantage estimators, policy losses and
  aggregations, KL, entropy control, Clip-Cov/KL-Cov, length shaping of rewards).
- ``loss_registry``: each policy loss registered with its typed options (``rl.loss``); the update
  dispatches through it.
- ``group_filters``: which groups a batch keeps (dynamic sampling) and which tasks it samples
  (``DifficultyTracker``); ``sampling`` is their old path (until 0.3).
- ``samples``: token ids + loss mask + sampling logprobs of a trajectory (token in, token out).
- ``sft``: supervised fine-tuning on verified trajectories; ``rl``: the producer → queue → consumer loop.
- ``optim``: the one AdamW and learning-rate schedule that SFT, RL and FSDP build.
- ``checkpoint`` (exact resume), ``monitor`` (metrics.jsonl, entropy-law fit), ``report`` (report.html).
- ``pipeline`` (``verigym train`` / ``verigym sft``; the quickstart recipes on top of it are
  ``verigym.recipes``); ``load_model``: the model and tokenizer of a ``[model]`` table through the one
  opener (``policies.spec.load_weights``), for training, the recipes and the benchmark scripts.
- ``rewards``: scored groups to rows with advantages (``Group``, ``Sample``, ``StepBatch``).
- The hooks ``verigym.scale`` builds on: ``forward_logprobs`` (the current policy's per-token
  logprobs of rows) and ``set_training`` (the model's train/eval flag), exported here;
  ``samples.Row.weights`` (per-token loss weights: importance correction) and the trainer's
  ``state.dist`` (a ``DataParallel``: data parallelism under torchrun).

The names here are imported when first asked for (``verigym.train.presets`` loads no torch).
"""

from collections.abc import Callable
from typing import TYPE_CHECKING

from verigym._lazy import lazy_getattr

if TYPE_CHECKING:
    from verigym.train._model import load_model
    from verigym.train._update import DataParallel, forward_logprobs, set_training
    from verigym.train.config import TrainConfig, build_config, load_config
    from verigym.train.pipeline import run_sft, run_train
    from verigym.train.presets import PRESETS
    from verigym.train.rewards import Group, Sample, StepBatch
    from verigym.train.rl import RLTrainer
    from verigym.train.sft import sft_train

# Lazy: ``import verigym.train.presets`` (the CLI's --preset help) loads no torch; each name below
# imports its module when first asked for.
__getattr__: Callable[[str], object] = lazy_getattr(
    __name__,
    {
        "load_model": "verigym.train._model",
        "DataParallel": "verigym.train._update",
        "forward_logprobs": "verigym.train._update",
        "set_training": "verigym.train._update",
        "TrainConfig": "verigym.train.config",
        "build_config": "verigym.train.config",
        "load_config": "verigym.train.config",
        "run_sft": "verigym.train.pipeline",
        "run_train": "verigym.train.pipeline",
        "PRESETS": "verigym.train.presets",
        "Group": "verigym.train.rewards",
        "Sample": "verigym.train.rewards",
        "StepBatch": "verigym.train.rewards",
        "RLTrainer": "verigym.train.rl",
        "sft_train": "verigym.train.sft",
    },
)


__all__ = [
    "PRESETS",
    "DataParallel",
    "Group",
    "RLTrainer",
    "Sample",
    "StepBatch",
    "TrainConfig",
    "build_config",
    "forward_logprobs",
    "load_config",
    "load_model",
    "run_sft",
    "run_train",
    "set_training",
    "sft_train",
]
