"""Loading a model and tokenizer for ``LocalPolicy`` and training: a catalogue name resolved to its
directory, a LoRA adapter directory's base model found, the one device and dtype rule
(``resolve_device``, ``resolve_dtype``), and the name the model goes by."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verigym.policies.base import PolicyError
from verigym.policies.catalogue import load_failure, resolve

__all__ = ["DTYPES", "Pretrained", "display_name", "load_pretrained", "resolve_device", "resolve_dtype"]

DTYPES = ("auto", "float32", "bfloat16", "float16")
"""The dtypes a model may be opened in; ``auto`` is ``resolve_dtype``'s rule."""

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


def resolve_device(device: str | None) -> str:
    """The device a model is opened on: ``device`` as given, ``None``/``auto`` CUDA when available."""
    if device is None or device == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def resolve_dtype(dtype: Any, device: str) -> Any:
    """The torch dtype a model is opened in (the one rule, for sampling and training alike): a torch
    dtype or an explicit name (``float32``, ``bfloat16``, ``float16``) as given; ``None``/``auto``
    bfloat16 on CUDA and float32 elsewhere. ``ValueError`` for any other name."""
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype is None or dtype == "auto":
        return torch.bfloat16 if str(device).startswith("cuda") else torch.float32
    if dtype not in DTYPES:
        raise ValueError(f"{dtype!r} is not a dtype (expected one of {', '.join(DTYPES)})")
    return getattr(torch, dtype)


def load_pretrained(path: str | Path, dtype: Any = None, device: str | None = None) -> Pretrained:
    """See ``LocalPolicy.from_pretrained``."""
    path = resolve(str(path))  # a catalogue name (`verigym models pull NAME`) → its directory
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = resolve_device(device)
    dtype = resolve_dtype(dtype, device)
    adapter = Path(str(path)) / "adapter_config.json"
    base = str(path)
    if adapter.is_file():  # a LoRA adapter directory: load its base model, then the adapter
        base = str(json.loads(adapter.read_text()).get("base_model_name_or_path") or "")
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path) if _has_tokenizer(path) else base)
        model = AutoModelForCausalLM.from_pretrained(base, dtype=dtype)
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
