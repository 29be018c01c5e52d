"""Build the model, tokenizer and ``LocalPolicy`` a config names; LoRA; held-out evaluation."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verigym._model_files import ModelFileError, check_model_dir, load_error
from verigym.envs.base import Environment
from verigym.policies.base import ModelSpecError, Policy
from verigym.policies.spec import ModelSpec, load_weights
from verigym.record import fold
from verigym.runner import run_rollouts
from verigym.train.config import LoraConfig, ModelConfig
from verigym.types import Record, Sampling, Task

__all__ = ["apply_lora", "evaluate", "load_model", "model_spec", "resolve_device"]


def resolve_device(name: str) -> str:
    """``[model] device``: ``auto`` is CUDA when available (the opener's rule, ``resolve_device``)."""
    from verigym.policies.local.loading import resolve_device as rule

    return rule(name)


def model_spec(cfg: ModelConfig, source: str | Path | None = None) -> ModelSpec:
    """The ``ModelSpec`` of a ``[model]`` table (``source``: the weights to open, else ``cfg.path``)."""
    path = source if source is not None else cfg.path
    return ModelSpec(
        model=None if path is None else str(path),
        dtype=cfg.dtype,
        device=None if cfg.device == "auto" else cfg.device,
        tool_format=cfg.tool_format,
    )


def load_model(cfg: ModelConfig, *, weights: str | Path | None = None) -> tuple[Any, Any]:
    """(model, tokenizer) of a ``[model]`` table, opened by the one opener (``policies.spec.load_weights``:
    the dtype rule, the device, the folder checks): from ``weights`` (a checkpoint's ``model/``) or
    ``cfg.path``, else a fresh tiny model of size ``cfg.tiny`` built with ``cfg.seed``.

    For LoRA the base comes from ``cfg`` and the adapter from ``weights`` when given. A folder that
    cannot be a model, or weights that do not load, raise ``ModelFileError`` (one line naming
    ``model.path`` or the checkpoint).
    """
    full = weights if weights is not None and cfg.lora is None else None
    source = full or cfg.path
    if source is not None:
        from verigym.policies.catalogue import resolve

        source = resolve(str(source))  # a catalogue name (`verigym models pull NAME`) -> its directory
        where = "model.path" if full is None else "checkpoint"
        if not Path(source).exists():
            raise FileNotFoundError(f"{where}: no model directory at {source}")
        check_model_dir(source, where)  # a file, an empty folder, truncated weights: one line
    try:
        loaded = load_weights(model_spec(cfg, source), seed=cfg.seed, tiny=cfg.tiny or "tiny")
    except ModelSpecError as exc:  # mismatched shapes, an unknown architecture, a broken tokenizer
        raise ModelFileError(f"{where} {exc}" if source is not None else str(exc)) from None
    model, tokenizer = loaded.model, loaded.tokenizer
    if cfg.lora is not None:
        if weights is not None:
            from peft import PeftModel

            check_model_dir(weights, "checkpoint")
            try:
                model = PeftModel.from_pretrained(model, str(weights), is_trainable=True)
            except Exception as exc:
                raise ModelFileError(load_error(f"checkpoint {weights}", exc)) from None
        else:
            model = apply_lora(model, cfg.lora)
    model.eval()
    return model, tokenizer


def apply_lora(model: Any, cfg: LoraConfig) -> Any:
    """Wrap ``model`` with fresh LoRA adapters (only they are trainable)."""
    from peft import LoraConfig as PeftLora
    from peft import get_peft_model

    conf = PeftLora(
        r=cfg.r, lora_alpha=cfg.alpha, lora_dropout=cfg.dropout, target_modules=list(cfg.target_modules)
    )
    return get_peft_model(model, conf)


async def evaluate(
    env: Environment,
    policy: Policy,
    tasks: Sequence[Task],
    *,
    sampling: Sampling,
    samples: int = 1,
    env_name: str = "env",
    keep: list[Record] | None = None,
) -> dict[str, Any]:
    """Held-out pass@1 (the eval's: per task, the share of its scored samples with reward ≥ 1, averaged
    over tasks; with one sample per task, the share of tasks solved; None when no sample was scored,
    never a 0 that nothing measured), mean reward (None likewise), the error count (``errors``, of
    ``samples``, with ``first_error``) and the mean of each grader (``grader/NAME``, over the samples
    without an error; None when none was), all from ``verigym.record``'s fold, as ``verigym eval``'s."""
    records = await run_rollouts(
        env,
        policy,
        tasks,
        samples_per_task=samples,
        sampling=sampling,
        concurrency=max(1, len(tasks) * samples),
        env_name=env_name,
        model_name=policy.name,
    )
    if keep is not None:  # the caller keeps the records (train.rollouts' held-out sample for the viewer)
        keep.extend(records)
    folded = fold(records, samples_per_task=samples).headline()  # the eval summary's own fold
    out: dict[str, Any] = {
        "pass_at_1": folded["pass_at_1"],  # None: nothing scored
        "reward": folded["reward_mean"],
        "errors": float(folded["n_errors"]),
        "samples": float(folded["n_samples"]),
    }
    if "first_error" in folded:
        out["first_error"] = folded["first_error"]
    means = folded["grader_means"]
    for name in env.rubric.names:
        out[f"grader/{name}"] = means.get(name)  # None: no scored sample was graded by it
    return out
