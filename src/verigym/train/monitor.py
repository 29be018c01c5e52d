"""Run monitoring: ``metrics.jsonl`` (one line per step), optional TensorBoard / W&B writers, and the
fit of the Entropy Mechanism paper's law R = −a·exp(H) + b (Cui et al. 2025, arXiv:2505.22617),
whose b − a predicts the reward a run reaches as its entropy runs out (H → 0).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from verigym._files import write_atomic
from verigym._numbers import json_safe

__all__ = ["MetricsLog", "fit_entropy_law", "read_metrics"]


class MetricsLog:
    """Appends one JSON object per step to ``path`` (flushed at once); mirrors to TB/W&B when asked."""

    def __init__(
        self, path: str | Path, *, tensorboard: bool = False, wandb: bool = False, run_name: str = ""
    ) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._tb: Any = None
        self._wandb: Any = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter

                self._tb = SummaryWriter(str(self.path.parent / "tensorboard"))
            except ImportError:  # tensorboard not installed: the JSONL log is enough
                self._tb = None
        if wandb:
            try:
                import wandb as wandb_mod

                self._wandb = wandb_mod.init(project="verigym", name=run_name or self.path.parent.name)
            except ImportError:
                self._wandb = None

    def truncate_after(self, step: int) -> None:
        """Drop RL lines of steps > ``step`` (a resumed run rewrites them); other phases stay."""
        if not self.path.is_file():
            return
        keep = [
            r for r in read_metrics(self.path) if r.get("phase") != "rl" or int(r.get("step", -1)) <= step
        ]
        write_atomic(self.path, "".join(json.dumps(r) + "\n" for r in keep))  # unchanged: left alone

    def log(self, record: dict[str, Any]) -> None:
        """Append one line (valid JSON: a non-finite number is written as null) and flush it."""
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(json_safe(record), allow_nan=False) + "\n")
            f.flush()
        step = int(record.get("step", 0))
        if self._tb is not None:
            for k, v in record.items():
                if isinstance(v, int | float) and k != "step":
                    self._tb.add_scalar(k, v, step)
        if self._wandb is not None:
            self._wandb.log({k: v for k, v in record.items() if isinstance(v, int | float)}, step=step)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Every step record of a ``metrics.jsonl`` (a torn last line is ignored)."""
    out: list[dict[str, Any]] = []
    p = Path(path)
    if not p.is_file():
        return out
    for line in p.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def fit_entropy_law(entropy: Sequence[float], reward: Sequence[float]) -> dict[str, float] | None:
    """Least-squares fit of R = −a·exp(H) + b; returns a, b, r2 and the predicted ceiling b − a.

    None when there are fewer than 3 finite points or the entropy does not vary.
    """
    pts = [(h, r) for h, r in zip(entropy, reward, strict=False) if math.isfinite(h) and math.isfinite(r)]
    if len(pts) < 3:
        return None
    x = np.exp(np.array([p[0] for p in pts]))
    y = np.array([p[1] for p in pts])
    if float(np.ptp(x)) < 1e-12:
        return None
    slope, intercept = np.polyfit(x, y, 1)
    pred = slope * x + intercept
    ss_res = float(((y - pred) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    a, b = float(-slope), float(intercept)
    return {"a": a, "b": b, "r2": 1 - ss_res / ss_tot if ss_tot > 0 else 0.0, "ceiling": b - a}
