"""Checkpoints that resume exactly: model (or LoRA adapter), tokenizer, optimizer, scheduler, RNG
states, the trainer's own state and the step.

Layout of ``RUN_DIR/checkpoints/step_000010/``: ``model/`` (``save_pretrained``: full weights, or
the adapter for LoRA), ``trainer.pt`` (optimizer, scheduler, RNG states, trainer state) and
``state.json`` (step, for humans). ``RUN_DIR/checkpoints/latest`` names the newest one. A
checkpoint is written to a temporary directory and renamed, so a crash never leaves half of one.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["latest_checkpoint", "load_checkpoint", "rng_state", "save_checkpoint", "set_rng_state"]


def rng_state() -> dict[str, Any]:
    """The global RNG states (python, numpy, torch CPU and CUDA)."""
    state: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    run_dir: str | Path,
    step: int,
    *,
    model: Any,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    trainer_state: dict[str, Any],
    keep: int = 2,
) -> Path:
    """Write ``checkpoints/step_{step:06d}`` and point ``latest`` at it; keep the newest ``keep``."""
    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step_{step:06d}"
    tmp = root / f".tmp_step_{step:06d}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # no "Writing model shards" bars between our own progress lines
    model.save_pretrained(tmp / "model")
    tokenizer.save_pretrained(tmp / "model")
    torch.save(
        {
            "step": step,
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "rng": rng_state(),
            "trainer": trainer_state,
        },
        tmp / "trainer.pt",
    )
    (tmp / "state.json").write_text(json.dumps({"step": step}) + "\n")
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    (root / "latest").write_text(final.name + "\n")
    old = sorted(p for p in root.glob("step_*") if p.is_dir())
    for p in old[: max(len(old) - keep, 0)]:
        shutil.rmtree(p, ignore_errors=True)
    return final


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The newest complete checkpoint of a run, or None."""
    root = Path(run_dir) / "checkpoints"
    pointer = root / "latest"
    if pointer.is_file():
        path = root / pointer.read_text().strip()
        if (path / "trainer.pt").is_file():
            return path
    done = sorted(p for p in root.glob("step_*") if (p / "trainer.pt").is_file())
    return done[-1] if done else None


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """The ``trainer.pt`` payload (weights are loaded separately from ``path/model``)."""
    payload: dict[str, Any] = torch.load(Path(path) / "trainer.pt", map_location="cpu", weights_only=False)
    return payload
