"""Build the model, tokenizer and ``LocalPolicy`` a config names; LoRA; held-out evaluation."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verigym._model_files import ModelFileError, check_model_dir, load_error
from verigym.envs.base import Environment
from verigym.policies.base import Policy
from verigym.record import fold
from verigym.runner import run_rollouts
from verigym.train.config import LoraConfig, ModelConfig
from verigym.types import Sampling, Task

__all__ = ["apply_lora", "evaluate", "load_model", "resolve_device"]


def resolve_device(name: str) -> str:
    import torch

    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def load_model(cfg: ModelConfig, *, weights: str | Path | None = None) -> tuple[Any, Any]:
    """(model, tokenizer): from ``weights`` (a checkpoint's ``model/``) or ``cfg.path``, else a fresh tiny.

    For LoRA the base comes from ``cfg`` and the adapter from ``weights`` when given. A folder that
    cannot be a model, or weights that do not load, raise ``ModelFileError`` (one line).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = resolve_device(cfg.device)
    dtype = torch.float32
    if cfg.dtype == "bfloat16" or (cfg.dtype == "auto" and device.startswith("cuda")):
        dtype = torch.bfloat16
    model: Any
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
            tokenizer = AutoTokenizer.from_pretrained(str(source))
            model = AutoModelForCausalLM.from_pretrained(str(source), dtype=dtype)
        except Exception as exc:  # mismatched shapes, an unknown architecture, a broken tokenizer
            raise ModelFileError(load_error(f"{where} {source}", exc)) from None
    else:
        from verigym.policies import tiny

        tokenizer = tiny.build_tokenizer()
        model = tiny.build_model(cfg.tiny or "tiny", tokenizer, cfg.seed)
        model = model.to(dtype=dtype)
    model = model.to(device)
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
