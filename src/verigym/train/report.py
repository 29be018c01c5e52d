"""``report.html`` of a training run: the health curves as PNGs, the entropy-law fit and a summary."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from verigym._report import HtmlReport, figure
from verigym.train.monitor import fit_entropy_law, read_metrics

__all__ = ["write_report"]

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


def write_report(
    run_dir: str | Path, *, title: str = "verigym training run", summary: Mapping[str, Any] | None = None
) -> Path:
    """Write ``run_dir/report.html`` from ``run_dir/metrics.jsonl``."""
    run = Path(run_dir)
    rows = [r for r in read_metrics(run / "metrics.jsonl") if r.get("phase", "rl") == "rl"]
    rep = HtmlReport(title)
    if summary:
        rep.heading("Summary")
        rep.table([[k, v] for k, v in summary.items()], header=["", "value"])
    rep.heading("Curves")
    if not rows:
        rep.paragraph("No RL steps were logged.")
    graders = sorted({k for r in rows for k in r if k.startswith("grader/")})
    panels = [*_PANELS[:2], ("Graders (train batch means)", graders), *_PANELS[2:]]
    for name, keys in panels:
        present = [k for k in keys if _series(rows, k)[1]]
        if not present:
            continue
        fig = figure(5.5, 2.8)
        ax = fig.add_subplot()
        for k in present:
            xs, ys = _series(rows, k)
            ax.plot(xs, ys, marker="." if len(xs) < 40 else None, label=k)
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
