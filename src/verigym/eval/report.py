"""``report.html`` of an eval: summary table, reward histogram, per-grader bars, errors, and a
browsable sample of trajectories with their grades. One self-contained file (``HtmlReport``).
"""

from __future__ import annotations

import html
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verigym._report import HtmlReport, figure
from verigym.types import Record

__all__ = ["pick_examples", "render_trajectory", "write_report"]


def render_trajectory(record: Record) -> str:
    """A plain-text view of one sample: every message, tool call, grade and the error."""
    lines: list[str] = []
    for msg in record.trajectory.messages:
        head = f"[{msg.role}]" + (f" ({msg.name})" if msg.name else "")
        lines.append(f"{head}\n{msg.content}")
        for call in msg.tool_calls:
            lines.append(f"  -> tool call {call.name}({call.arguments})")
    lines.append("")
    lines.append(f"stop reason: {record.trajectory.stop_reason}    wall: {record.wall_s:.2f}s")
    for name, grade in record.score.grades.items():
        verdict = f"error: {grade.error}" if grade.error else f"{grade.score:.3g}"
        lines.append(f"grade {name}: {verdict}" + (f"  ({grade.detail})" if grade.detail else ""))
    if record.error is not None:
        lines.append(f"ERROR [{record.error.kind}] {record.error.message}")
    return "\n".join(lines)


def pick_examples(records: Sequence[Record], limit: int = 60, seed: int = 0) -> list[Record]:
    """Up to ``limit`` samples: some errored, some below and some at the top reward, then random."""
    rng = random.Random(seed)
    errored = [r for r in records if r.error is not None]
    scored = sorted((r for r in records if r.error is None), key=lambda r: r.score.reward or 0.0)
    third = max(1, limit // 3)
    chosen = errored[:third] + scored[:third] + scored[-third:]
    seen = {id(r) for r in chosen}
    rest = [r for r in records if id(r) not in seen]
    rng.shuffle(rest)
    chosen += rest[: max(0, limit - len(chosen))]
    unique = list({id(r): r for r in chosen}.values())[:limit]
    return sorted(unique, key=lambda r: (r.task_id, r.sample_index))


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, float) for v in value):
        return f"[{value[0]:.4g}, {value[1]:.4g}]"
    return str(value)


def write_report(
    path: str | Path, records: Sequence[Record], summary: dict[str, Any], config: dict[str, Any]
) -> Path:
    """Write the eval report to ``path`` and return it."""
    report = HtmlReport(f"verigym eval: {config.get('env', '?')} · {config.get('model') or 'default policy'}")
    report.heading("Summary")
    rows = [
        (k, _fmt(v))
        for k, v in summary.items()
        if k not in ("pass_at_k", "grader_means", "errors_by_kind", "stop_reasons", "penalties")
    ]
    rows += [(f"pass@{k}", _fmt(v)) for k, v in summary.get("pass_at_k", {}).items()]
    report.table(rows, header=["metric", "value"])
    report.paragraph(
        "Errored samples are counted apart and left out of every reward statistic; "
        "the 95% interval is a bootstrap over tasks."
    )
    rewards = [r.score.reward for r in records if r.error is None and r.score.reward is not None]
    if rewards:
        fig = figure(6, 3)
        ax = fig.add_subplot()
        ax.hist(rewards, bins=min(30, max(5, len(set(rewards)) * 2)), color="#4477aa")
        ax.set_xlabel("reward")
        ax.set_ylabel("samples")
        ax.set_title(f"reward of {len(rewards)} scored samples")
        report.image(fig, "reward histogram")
    means = {k: v for k, v in summary.get("grader_means", {}).items() if v is not None}
    if means:
        fig = figure(6, max(2.0, 0.4 * len(means) + 1))
        ax = fig.add_subplot()
        ax.barh(list(means), list(means.values()), color="#66aa55")
        ax.set_xlabel("mean grade (non-errored)")
        ax.invert_yaxis()
        report.image(fig, "per-grader means")
    if summary.get("errors_by_kind"):
        report.heading("Errors")
        examples: dict[str, str] = {}
        for r in records:
            if r.error is not None:
                examples.setdefault(r.error.kind, r.error.message)
        report.table(
            [(k, n, examples.get(k, "")[:200]) for k, n in summary["errors_by_kind"].items()],
            header=["kind", "samples", "example"],
        )
    report.heading("Stop reasons")
    report.table(list(summary.get("stop_reasons", {}).items()), header=["stop reason", "samples"])
    shown = pick_examples(records)
    report.heading(f"Trajectories ({len(shown)} of {len(records)})")
    for r in shown:
        if r.error is not None:
            css, verdict = "err", f"error ({r.error.kind})"
        else:
            reward = r.score.reward or 0.0
            css = "ok" if reward >= summary.get("success_threshold", 1.0) else "bad"
            verdict = f"reward {reward:.3g}"
        report.details(
            f"{r.task_id} #{r.sample_index} · {verdict} · {r.trajectory.stop_reason}",
            render_trajectory(r),
            css,
        )
    report.heading("Configuration")
    report.raw(f"<pre>{html.escape(repr(config))}</pre>")
    return report.write(path)
