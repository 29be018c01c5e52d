"""``report.html`` of a training run: a labelled summary, the health curves as PNGs (the held-out pass@1
with the SFT point at step 0), the entropy-law fit."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from verigym._report import HtmlReport, figure
from verigym.train.monitor import fit_entropy_law, read_metrics

__all__ = ["summary_rows", "write_report"]

_PANELS: list[tuple[str, list[str]]] = [
    ("Reward", ["reward", "reward_rubric"]),
    ("Pass rate (train batch)", ["pass_rate"]),
    ("Held-out pass@1", ["eval/pass_at_1"]),
    ("Entropy / NLL", ["entropy", "nll"]),
    ("KL to reference", ["kl"]),
    ("Clip fractions", ["clip_frac_low", "clip_frac_high"]),
    ("Covariance proxy Cov(log π, π·A)", ["cov_proxy"]),
    ("Response length", ["length_mean", "length_max"]),
    ("Truncation / dropped groups", ["truncation_rate", "frac_groups_dropped"]),
    ("Grad norm", ["grad_norm"]),
    ("Throughput (tokens/s)", ["tokens_per_s"]),
    ("Step time (s)", ["step_time_s", "gen_time_s", "update_time_s"]),
]


def _series(rows: Sequence[Mapping[str, Any]], key: str) -> tuple[list[float], list[float]]:
    xs: list[float] = []
    ys: list[float] = []
    for r in rows:
        v = r.get(key)
        if isinstance(v, int | float) and math.isfinite(v):
            xs.append(float(r.get("step", len(xs))))
            ys.append(float(v))
    return xs, ys


_NAMES = {
    "pass_at_1_initial": "held-out pass@1, initial model",
    "pass_at_1_after_sft": "held-out pass@1 after SFT",
    "pass_at_1_after_rl": "held-out pass@1 after RL",
    "pass_at_1": "held-out pass@1",
    "sft_steps": "SFT steps",
    "steps": "RL steps",
    "wall_s": "wall time (s)",
    "train_samples": "training samples",
    "train_samples_errored": "training samples errored (not trained on)",
    "train_first_error": "first training error",
    "model_dir": "final model",
    "sft_model_dir": "model after SFT",
    "model_files_shared_with": "model files shared with",
    "run_dir_mb": "run folder (MB)",
    "model_mb": "model (MB)",
    "resume_state_mb": "resume state (MB)",
}


def _label(key: str) -> str:
    """A summary or metrics key as words: ``eval/ENV/grader/NAME_initial`` -> ``held-out ENV: grader NAME, initial``."""
    if key in _NAMES:
        return _NAMES[key]
    text = key
    for suffix, words in (
        ("_initial", ", initial model"),
        ("_after_sft", " after SFT"),
        ("_after_rl", " after RL"),
    ):
        if text.endswith(suffix):
            text = text[: -len(suffix)] + words
    if text.startswith("eval/"):
        parts = text[5:].split("/")
        text = "held-out " + (f"{parts[0]}: " + " ".join(parts[1:]) if len(parts) > 1 else parts[0])
    return text.replace("pass_at_1", "pass@1").replace("grader/", "grader ").replace("_", " ")


def summary_rows(summary: Mapping[str, Any]) -> list[list[Any]]:
    """The summary as labelled rows (the run header and the format version left out)."""
    return [[_label(k), v] for k, v in summary.items() if k not in ("run", "format_version", "non_finite")]


def write_report(
    run_dir: str | Path, *, title: str = "verigym training run", summary: Mapping[str, Any] | None = None
) -> Path:
    """Write ``run_dir/report.html`` from ``run_dir/metrics.jsonl``."""
    run = Path(run_dir)
    rows = [r for r in read_metrics(run / "metrics.jsonl") if r.get("phase", "rl") == "rl"]
    rep = HtmlReport(title)
    summary = summary or {}
    if summary:
        rep.heading("Summary")
        rep.table(summary_rows(summary), header=["", "value"])
    rep.heading("Curves")
    if not rows:
        rep.paragraph("No RL steps were logged.")
    graders = sorted({k for r in rows for k in r if k.startswith("grader/")})
    panels = [*_PANELS[:2], ("Graders (train batch means)", graders), *_PANELS[2:]]
    sft = summary.get("pass_at_1_after_sft")
    sft_point = float(sft) if isinstance(sft, int | float) and math.isfinite(sft) else math.nan
    for name, keys in panels:
        present = [k for k in keys if _series(rows, k)[1]]
        held_out = "eval/pass_at_1" in keys and math.isfinite(sft_point)
        if not present and not held_out:
            continue
        fig = figure(5.5, 2.8)
        ax = fig.add_subplot()
        for k in present:
            xs, ys = _series(rows, k)
            ax.plot(xs, ys, marker="." if len(xs) < 40 else None, label=_label(k))
        if held_out:  # where RL started from: the held-out pass@1 after SFT, at step 0
            ax.plot([0.0], [sft_point], marker="s", color="C1", linestyle="none", label="after SFT")
            ax.legend(fontsize=7)
        ax.set_title(name)
        ax.set_xlabel("step")
        if len(present) > 1:
            ax.legend(fontsize=7)
        rep.image(fig, alt=name)
    env_keys = sorted({k for r in rows for k in r if k.startswith("env/") and k.endswith("/pass_rate")})
    if len(env_keys) > 1:
        fig = figure(5.5, 2.8)
        ax = fig.add_subplot()
        for k in env_keys:
            ax.plot(*_series(rows, k), label=k.split("/")[1])
        ax.set_title("Pass rate per environment")
        ax.legend(fontsize=7)
        rep.image(fig, alt="per-environment pass rate")
    rep.heading("Entropy law R = −a·exp(H) + b")
    h = [float(r.get("entropy", math.nan)) for r in rows]
    rw = [float(r.get("reward_rubric", math.nan)) for r in rows]
    fit = fit_entropy_law(h, rw)
    if fit is None:
        rep.paragraph("Not enough varying points to fit.")
    else:
        rep.paragraph(
            f"a = {fit['a']:.4g}, b = {fit['b']:.4g}, R² = {fit['r2']:.3f}; predicted reward at H → 0: {fit['ceiling']:.4g}."
        )
        pts = [(x, y) for x, y in zip(h, rw, strict=True) if math.isfinite(x) and math.isfinite(y)]
        fig = figure(4.5, 3.0)
        ax = fig.add_subplot()
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=8, label="steps")
        lo, hi = min(p[0] for p in pts), max(p[0] for p in pts)
        grid = [lo + (hi - lo) * i / 50 for i in range(51)]
        ax.plot(grid, [-fit["a"] * math.exp(g) + fit["b"] for g in grid], color="C1", label="fit")
        ax.set_xlabel("entropy H")
        ax.set_ylabel("reward R")
        ax.legend(fontsize=7)
        rep.image(fig, alt="entropy law fit")
    return rep.write(run / "report.html")
