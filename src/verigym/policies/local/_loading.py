"""Loading a ``LocalPolicy``'s model and tokenizer (``LocalPolicy.from_pretrained``): a catalogue name
resolved to its directory, a LoRA adapter directory's base model found, and the name the model goes by."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verigym.policies.base import PolicyError
from verigym.policies.catalogue import load_failure, resolve

__all__ = ["Pretrained", "display_name", "load_pretrained"]

_GENERIC_DIRS = frozenset({"checkpoint", "checkpoints", "model", "sft", "final", "latest"})


@dataclass(frozen=True)
class Pretrained:
    """A loaded model (in eval mode, not yet on ``device``) and tokenizer, from ``path`` (resolved);
    ``adapter`` is true when ``path`` is a LoRA adapter directory (the model is its base)."""

    model: Any
    tokenizer: Any
    path: str
    device: str
    adapter: bool


def load_pretrained(path: str | Path, dtype: Any = None, device: str | None = None) -> Pretrained:
    """See ``LocalPolicy.from_pretrained``."""
    path = resolve(str(path))  # a catalogue name (`verigym models pull NAME`) → its directory
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if isinstance(dtype, str) and dtype != "auto":
        dtype = getattr(torch, dtype)
    adapter = Path(str(path)) / "adapter_config.json"
    base = str(path)
    if adapter.is_file():  # a LoRA adapter directory: load its base model, then the adapter
        base = str(json.loads(adapter.read_text()).get("base_model_name_or_path") or "")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path) if _has_tokenizer(path) else base)
        model = AutoModelForCausalLM.from_pretrained(base, dtype=dtype or torch.float32)
    except (OSError, ValueError) as exc:
        raise PolicyError("model_not_found", load_failure(str(path), exc)) from None
    model.eval()
    return Pretrained(model, tokenizer, str(path), device, adapter.is_file())


def display_name(path: str) -> str:
    """A model's name: its directory's, or for a run's generic one the run's (``runs/quickstart/checkpoint``
    is ``quickstart``; ``runs/x/checkpoints/step_000005/model`` is ``x@step_000005``)."""
    step = ""
    for part in reversed(Path(path).parts):
        if part.startswith("step_"):
            step = step or f"@{part}"
        elif part not in _GENERIC_DIRS:
            return part + step
    return Path(path).name or path


def _has_tokenizer(path: str | Path) -> bool:
    return any((Path(str(path)) / f).is_file() for f in ("tokenizer.json", "tokenizer_config.json"))
