"""A training run for the viewer: its curves (with the SFT point) and each step's kept rollouts.

``metrics.jsonl`` gives one row per RL step (and SFT rows with their held-out evals);
``stages.json``/``summary.json`` give the held-out pass@1 before RL (``pass_at_1_after_sft``), drawn
as the curve's point at step 0. ``rollouts_sample.jsonl`` (``train.rollouts``) holds the groups kept
per step and ``heldout_sample.jsonl`` a few samples of each held-out eval; both are indexed by byte
offset per step and a step's line is read when it is opened (with the nearest eval's samples). Both files
are read again from where they were left when they grow (a run being trained).
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Any

from verigym.types import Record
from verigym.view._runs import read_json

__all__ = ["TrainView"]

CURVES = (
    "reward",
    "pass_rate",
    "eval/pass_at_1",
    "entropy",
    "kl",
    "length_mean",
    "truncation_rate",
    "frac_groups_dropped",
    "grad_norm",
    "logprob_diff",
    "clip_frac_high",
    "step_time_s",
)


class _Lines:
    """JSON lines of a growing file, read from where the last call stopped (complete lines only)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.done = 0
        self.spans: list[tuple[int, int]] = []

    def new(self) -> list[tuple[int, int, bytes]]:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return []
        if size < self.done:  # rewritten (a resumed run)
            self.done, self.spans = 0, []
        if size == self.done:
            return []
        with self.path.open("rb") as fh:
            fh.seek(self.done)
            data = fh.read(size - self.done)
        cut = data.rfind(b"\n") + 1
        out = []
        pos = 0
        for line in data[:cut].split(b"\n")[:-1]:
            out.append((self.done + pos, len(line), line))
            pos += len(line) + 1
        self.done += cut
        return out


class TrainView:
    """The curves and kept rollouts of one training run folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.lock = threading.Lock()
        self._metrics = _Lines(folder / "metrics.jsonl")
        self._rollouts = _Lines(folder / "rollouts_sample.jsonl")
        self._heldout = _Lines(folder / "heldout_sample.jsonl")
        self.heldout_steps: dict[int, tuple[int, int]] = {}  # step -> byte span in heldout_sample.jsonl
        self.rl: list[dict[str, Any]] = []
        self.sft_evals: list[tuple[int, float]] = []
        self.steps: dict[int, tuple[int, int]] = {}  # step -> byte span in rollouts_sample.jsonl

    def _refresh(self) -> None:
        if self._metrics.done == 0:
            self.rl, self.sft_evals = [], []
        for _, _, line in self._metrics.new():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if row.get("phase", "rl") == "rl":
                self.rl = [r for r in self.rl if r["step"] < row.get("step", 0)]  # a resumed run's redo
                keep = {k: v for k, v in row.items() if k in CURVES or k.startswith(("grader/", "eval/"))}
                keep = {k: v for k, v in keep.items() if isinstance(v, int | float) and math.isfinite(v)}
                self.rl.append({"step": int(row.get("step", len(self.rl))), **keep})
            elif isinstance(row.get("eval/pass_at_1"), int | float):
                self.sft_evals.append((int(row.get("step", 0)), float(row["eval/pass_at_1"])))
        for lines, spans in ((self._rollouts, self.steps), (self._heldout, self.heldout_steps)):
            if lines.done == 0:
                spans.clear()
            for offset, length, line in lines.new():
                head = line[:40].decode("utf-8", "replace")
                if head.startswith('{"step": '):
                    try:
                        spans[int(head[9:].split(",", 1)[0])] = (offset, length)
                    except ValueError:
                        continue

    def curves(self) -> dict[str, Any]:
        """The RL rows (numeric values only), the SFT point, the SFT held-out evals and the steps with rollouts."""
        with self.lock:
            self._refresh()
            stages = read_json(self.folder / "stages.json") or read_json(self.folder / "summary.json") or {}
            sft = stages.get("pass_at_1_after_sft") if isinstance(stages, dict) else None
            initial = stages.get("pass_at_1_initial") if isinstance(stages, dict) else None
            return {
                "rows": list(self.rl),
                "sft_point": sft if isinstance(sft, int | float) else None,
                "initial_point": initial if isinstance(initial, int | float) else None,
                "sft_evals": list(self.sft_evals),
                "steps_with_rollouts": sorted(self.steps),
                "summary": read_json(self.folder / "summary.json"),
            }

    def step(self, step: int) -> dict[str, Any] | None:
        """The kept groups of ``step`` (None when none were kept), with the nearest held-out eval."""
        with self.lock:
            self._refresh()
            span = self.steps.get(step)
            if span is None:
                return None
            with (self.folder / "rollouts_sample.jsonl").open("rb") as fh:
                fh.seek(span[0])
                data: dict[str, Any] = json.loads(fh.read(span[1]))
            evals = [r for r in self.rl if "eval/pass_at_1" in r]
            if evals:
                near = min(evals, key=lambda r: abs(r["step"] - step))
                data["nearest_eval"] = {k: v for k, v in near.items() if k.startswith("eval/") or k == "step"}
            metrics = next((r for r in self.rl if r["step"] == step), None)
            data["metrics"] = metrics
            data["heldout"] = self._nearest_heldout(step)
            return data

    def _nearest_heldout(self, step: int) -> dict[str, Any] | None:
        """The kept held-out samples of the eval nearest ``step`` (``train.rollouts``' heldout_sample.jsonl):
        per sample its environment, task, reward, grades, error, stop reason and final answer."""
        if not self.heldout_steps:
            return None
        near = min(self.heldout_steps, key=lambda s: (abs(s - step), s))
        offset, length = self.heldout_steps[near]
        with (self.folder / "heldout_sample.jsonl").open("rb") as fh:
            fh.seek(offset)
            line = json.loads(fh.read(length))
        samples = []
        for env, records in (line.get("envs") or {}).items():
            for raw in records:
                try:
                    r = Record.model_validate(raw)
                except ValueError:
                    continue
                samples.append(
                    {
                        "env": env,
                        "task_id": r.task_id,
                        "sample_index": r.sample_index,
                        "reward": r.score.reward,
                        "grades": {n: (None if g.error else g.score) for n, g in r.score.grades.items()},
                        "error": None if r.error is None else f"{r.error.kind}: {r.error.message}",
                        "stop_reason": r.trajectory.stop_reason,
                        "prompt": "\n".join(m.content for m in r.trajectory.prompt if m.role != "system"),
                        "answer": r.trajectory.final_text,
                    }
                )
        return {"step": near, "samples": samples}
