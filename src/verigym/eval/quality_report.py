"""The HTML page of a benchmark-quality report (plots of pass rates, pair CIs, top tasks)."""

from __future__ import annotations

from pathlib import Path

from verigym._report import HtmlReport, figure
from verigym.eval.quality import QualityReport

__all__ = ["write_quality_report"]


def write_quality_report(report: QualityReport, path: str | Path) -> Path:
    page = HtmlReport("verigym benchmark quality")
    h, s = report.hardness, report.separability
    page.heading("Hardness")
    page.table(
        [
            ["tasks", h["n_tasks"]],
            ["mean pass rate", h["mean_pass_rate"]],
            ["unsolved by every model", f"{h['share_unsolved_by_all']:.1%}"],
            ["solved by every model", f"{h['share_solved_by_all']:.1%}"],
        ]
    )
    fig = figure(9, 3.2)
    ax1, ax2 = fig.subplots(1, 2)
    ax1.bar([f"{i / 10:.1f}" for i in range(10)], h["histogram"], color="#4c72b0")
    ax1.set_xlabel("pass rate (pooled over models)")
    ax1.set_ylabel("tasks")
    models = list(h["per_model_mean"])
    ax2.bar(models, [h["per_model_mean"][m] for m in models], color="#55a868")
    ax2.set_ylabel("mean pass rate")
    page.image(fig, "pass rates")
    page.heading("Separability")
    page.paragraph(
        f"{s['share_separated']:.1%} of model pairs differ significantly (paired bootstrap over tasks); "
        f"rank stability (Kendall tau under task resampling) {s['rank_stability_tau']:.3f}."
    )
    page.table(
        [
            [p["a"], p["b"], p["diff"], f"[{p['ci'][0]:.3f}, {p['ci'][1]:.3f}]", p["separated"]]
            for p in s["pairs"]
        ],
        header=["model A", "model B", "mean diff", "95% CI", "separated"],
    )
    page.heading("Most discriminating tasks")
    page.table(
        [
            [d["task_id"], d["std"], ", ".join(f"{m}: {r:.2f}" for m, r in d["rates"].items())]
            for d in report.discriminating_tasks
        ],
        header=["task", "std across models", "pass rates"],
    )
    page.heading("Diversity")
    page.table([[k, v] for k, v in report.diversity.items()])
    if report.noise:
        page.heading("Noise (test-retest)")
        page.table([[k, v] for k, v in report.noise.items()])
    page.heading("Errors")
    page.table([[m, n] for m, n in report.errors.items()], header=["model", "errored samples"])
    return page.write(path)
