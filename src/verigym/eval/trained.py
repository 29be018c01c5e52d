"""An environment's arguments for a model that remembers its training (``policies.trained``).

A checkpoint verigym trained carries the arguments each of its environments had (the prompt variant,
the tool schema's form, ...). ``trained_args`` gives an environment those of them that differ from its
defaults, unless the user set them; where they came from is kept (``EvalConfig.env_args_from``:
``user``, ``checkpoint``, ``real_model``) and lands in ``summary.json``. ``verigym eval``, ``select``,
``suite`` and ``verigym.evaluate`` all decide so; an environment the model was not trained on keeps
its own defaults for the model's family (``Environment.real_model_args`` for a pretrained model).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from verigym.policies.trained import TrainingRecord

__all__ = ["CHECKPOINT", "REAL_MODEL", "USER", "TrainedArgs", "sources_of", "trained_args"]

USER = "user"
"""Set by the user: ``--env-arg``, a config file, a suite's member arguments."""
CHECKPOINT = "checkpoint"
"""From the checkpoint's training record."""
REAL_MODEL = "real_model"
"""An environment's ``real_model_args`` for a pretrained model."""


@dataclass(frozen=True)
class TrainedArgs:
    """The arguments to build an environment with, where each came from, and one line saying so."""

    args: dict[str, Any]
    sources: dict[str, str] = field(default_factory=dict)
    message: str = ""


def _show(args: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in args.items())


def sources_of(args: Mapping[str, Any], known: Mapping[str, str]) -> dict[str, str]:
    """Each argument's source: ``known``'s, else ``user``."""
    return {k: known.get(k, USER) for k in args}


def trained_args(
    env: str,
    args: Mapping[str, Any],
    record: TrainingRecord | None,
    sources: Mapping[str, str] | None = None,
) -> TrainedArgs | None:
    """``args`` completed from ``record``'s arguments for ``env``; None when the model was not trained
    on ``env`` (or has no record), so the environment's own defaults apply.

    ``sources`` says where ``args`` came from (a resumed run's ``env_args_from``): an argument that
    came from the checkpoint before is not the user's. Recorded arguments equal to the environment's
    current defaults are not added (they change nothing)."""
    entry = record.env(env) if record is not None else None
    if entry is None:
        return None
    from verigym.envs.registry import EnvError, env_defaults

    try:
        defaults = env_defaults(env)
    except EnvError:
        defaults = {}
    known = dict(sources or {})
    mine = {k: v for k, v in args.items() if known.get(k, USER) == USER}
    recorded = {**entry.resolved, **entry.args}
    # what training set unlike today's defaults (a key the factory no longer takes only if given)
    trained = {
        k: v
        for k, v in recorded.items()
        if (k in defaults and defaults[k] != v) or (k not in defaults and k in entry.args)
    }
    added = {k: v for k, v in trained.items() if k not in mine}
    out = {**mine, **added}
    chosen = {k: (CHECKPOINT if k in added else USER) for k in out}
    differ = {k: recorded[k] for k, v in mine.items() if k in recorded and recorded[k] != v}
    replaced = f"--env-arg {_show({k: mine[k] for k in differ})} replaces the checkpoint's training ({_show(differ)})"
    if added:
        message = (
            f"using {env}'s arguments from the checkpoint's training: {_show(added)}; --env-arg to change"
        )
        message += f"; {replaced}" if differ else ""
    elif differ:
        message = f"{env}: {replaced}"
    elif trained:
        message = f"{env}: --env-arg gives the arguments the checkpoint was trained with ({_show(trained)})"
    else:
        message = f"{env}: the checkpoint was trained with {env}'s default arguments"
    return TrainedArgs(out, chosen, message)
