"""The training record a trainer writes into every model directory it saves (``policies.trained``).

``training_record(cfg, envs, tool_format, stage=..., step=...)`` describes what the weights were
trained with: each ``[[envs]]`` entry's arguments as given and as resolved (its factory's defaults
filled in), the environment's system prompt, the tool-call format of the trainer's policy, the
``[sampling]`` settings, the base model and verigym's version. ``pipeline.save_final`` and
``checkpoint.save_checkpoint`` write it with the weights, so ``sft/``, ``checkpoint/`` and every
``checkpoints/step_*/model/`` carry it; ``verigym eval`` and the others read it back.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from verigym.policies.trained import EnvRecord, SamplingRecord, TrainingRecord, verigym_version

if TYPE_CHECKING:
    from verigym.envs.base import Environment
    from verigym.train.config import ModelConfig, TrainConfig

__all__ = ["base_model_name", "resolved_args", "training_record"]


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def resolved_args(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` over the factory's defaults (``envs.registry.env_defaults``), JSON values only."""
    from verigym.envs.registry import EnvError, env_defaults

    try:
        defaults = env_defaults(name)
    except EnvError:
        defaults = {}
    return {k: v for k, v in {**defaults, **args}.items() if _jsonable(v)}


def base_model_name(model: ModelConfig) -> str:
    """The model training started from: ``[model] path`` (a directory, catalogue or Hub name), else the
    fresh ``tiny`` model's size (``tiny``, ``small``, ``base``)."""
    return model.path or f"{model.tiny or 'tiny'} (fresh, seed {model.seed})"


def training_record(
    cfg: TrainConfig,
    envs: Sequence[tuple[str, Environment]],
    tool_format: str | None,
    *,
    stage: Literal["sft", "rl"],
    step: int,
) -> TrainingRecord:
    """The record of weights trained by ``cfg`` on ``envs`` (the trainer's instances) to ``step`` of
    ``stage`` (``sft`` or ``rl``)."""
    given = {e.name: e for e in cfg.envs}
    records = []
    for name, env in envs:
        entry = given.get(name)
        args = dict(entry.args) if entry is not None else {}
        records.append(
            EnvRecord(
                name=name,
                args={k: v for k, v in args.items() if _jsonable(v)},
                resolved=resolved_args(name, args),
                system_prompt=getattr(env, "system_prompt", None),
                weight=entry.weight if entry is not None and _jsonable(entry.weight) else 1.0,
            )
        )
    return TrainingRecord(
        verigym_version=verigym_version(),
        stage=stage,
        step=step,
        base_model=base_model_name(cfg.model),
        envs=records,
        tool_format=tool_format,
        sampling=SamplingRecord(
            temperature=cfg.sampling.temperature,
            top_p=cfg.sampling.top_p,
            max_tokens=cfg.sampling.max_tokens,
        ),
    )
