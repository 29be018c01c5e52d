"""``report.html`` of an eval: summary table, reward histogram, per-grader bars, errors, and a
browsable sample of trajectories with their grades. One self-contained file (``HtmlReport``).

``Examples`` picks the trajectories to show while records stream by, in bounded memory: the report
never needs the run's records, only the summary, the rewards and those few examples.
"""

from __future__ import annotations

import heapq
import html
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from verigym._report import HtmlReport
from verigym.eval._svg import hbars_svg, histogram_svg, line_svg
from verigym.types import Record

__all__ = ["Examples", "pick_examples", "render_trajectory", "summary_rows", "write_report"]


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


class Examples:
    """Up to ``limit`` records for the report, chosen as records stream by: the first errored ones,
    the lowest and the highest rewards (a third of ``limit`` each), then others picked by a hash of
    ``(seed, task_id, sample_index)``. ``add(record, order)`` takes the record's place in the run;
    the choice depends on places, rewards and the hash only, not on arrival order."""

    def __init__(self, limit: int = 60, seed: int = 0) -> None:
        self.limit = limit
        self.third = max(1, limit // 3)
        self.seed = seed
        # bounded heaps whose root is the entry to drop next; the order (unique) breaks every tie
        self._errored: list[tuple[int, Record]] = []  # (-order)
        self._low: list[tuple[float, int, Record]] = []  # (-reward, -order)
        self._high: list[tuple[float, int, Record]] = []  # (reward, order)
        self._hashed: list[tuple[int, int, Record]] = []  # (-hash, -order)

    @staticmethod
    def _keep(heap: list[Any], size: int, entry: tuple[Any, ...]) -> None:
        if len(heap) < size:
            heapq.heappush(heap, entry)
        elif entry > heap[0]:
            heapq.heapreplace(heap, entry)

    def add(self, record: Record, order: int) -> None:
        keep = self._keep
        if record.error is not None:
            errored = self._errored
            if len(errored) < self.third or -order > errored[0][0]:
                keep(errored, self.third, (-order, record))
        else:
            reward = record.score.reward or 0.0
            low, high = self._low, self._high
            if len(low) < self.third or -reward > low[0][0] or (-reward == low[0][0] and -order > low[0][1]):
                keep(low, self.third, (-reward, -order, record))
            if len(high) < self.third or reward > high[0][0] or (reward == high[0][0] and order > high[0][1]):
                keep(high, self.third, (reward, order, record))
        mark = zlib.crc32(b"%d\x1f%s\x1f%d" % (self.seed, record.task_id.encode(), record.sample_index))
        hashed = self._hashed
        if (
            len(hashed) < self.limit
            or -mark > hashed[0][0]
            or (-mark == hashed[0][0] and -order > hashed[0][1])
        ):
            keep(hashed, self.limit, (-mark, -order, record))

    def chosen(self) -> list[Record]:
        """The picked records in run order."""
        picked: dict[int, Record] = {}
        for o, r in sorted(self._errored, reverse=True):
            picked.setdefault(-o, r)
        for _, o, r in sorted(self._low, reverse=True):
            picked.setdefault(-o, r)
        for _, o, r in sorted(self._high, reverse=True):
            picked.setdefault(o, r)
        for _, o, r in sorted(self._hashed, reverse=True):
            if len(picked) >= self.limit:
                break
            picked.setdefault(-o, r)
        return [picked[o] for o in sorted(picked)][: self.limit]


def pick_examples(records: Sequence[Record], limit: int = 60, seed: int = 0) -> list[Record]:
    """Up to ``limit`` samples: some errored, some below and some at the top reward, then others."""
    examples = Examples(limit, seed)
    for order, record in enumerate(records):
        examples.add(record, order)
    return examples.chosen()


# summary.json's keys as the report's summary table labels them, in this order; a key not listed is
# shown under its own name after these (a newer summary's field is never dropped)
_LABELS = {
    "n_tasks": "tasks",
    "n_samples": "samples",
    "n_expected": "samples asked for",
    "n_scored": "scored samples",
    "n_errors": "errored samples (no reward)",
    "first_error": "first error",
    "empty_answers": "empty answers",
    "reward_mean": "mean reward",
    "reward_ci95": "mean reward, 95% CI (bootstrap over tasks)",
    "success_threshold": "pass: reward at least",
    "pass_at_k": "pass@k",
    "penalty_mean": "mean cheating penalty",
    "completion_tokens_mean": "completion tokens, mean",
    "completion_tokens_max": "completion tokens, max",
    "truncation_rate": "cut at max tokens",
    "prefix_breaks": "multi-turn prefix breaks",
    "tool_call_parse_failures": "tool calls that did not parse",
    "tool_call_parse_failure_rate": "tool calls that did not parse, share",
    "prompt_tokens": "prompt tokens",
    "completion_tokens": "completion tokens",
    "total_tokens": "total tokens",
    "wall_s": "wall time (s)",
}
# shown elsewhere in the report (their own sections) or not a figure (the run header)
_ELSEWHERE = {
    "grader_means",
    "errors_by_kind",
    "error_examples",
    "stop_reasons",
    "penalties",
    "env_metrics",
    "run",
    "non_finite",
}


def summary_rows(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The summary as labelled rows: pass@k on one line, the prefix breaks as a fraction."""
    rows: list[tuple[str, str]] = []
    keys = [k for k in _LABELS if k in summary] + [k for k in summary if k not in _LABELS]
    for key in keys:
        value = summary[key]
        if key in _ELSEWHERE or key == "format_version":
            continue
        if key == "pass_at_k":
            text = "  ·  ".join(f"pass@{k} {_fmt(v)}" for k, v in value.items()) or "–"
        elif key == "prefix_breaks" and isinstance(value, Mapping):
            text = f"{value.get('breaks', 0)} of {value.get('turn_pairs', 0)} turn pairs"
        else:
            text = _fmt(value)
        rows.append((_LABELS.get(key, key.replace("_", " ")), text))
    return rows


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, float) for v in value):
        return f"[{value[0]:.4g}, {value[1]:.4g}]"
    return str(value)


def write_report(
    path: str | Path,
    summary: dict[str, Any],
    config: dict[str, Any],
    *,
    rewards: Sequence[float],
    examples: Sequence[Record],
    error_examples: Mapping[str, str],
) -> Path:
    """Write the eval report to ``path`` and return it.

    ``rewards``: every scored sample's reward (the histogram); ``examples``: the trajectories to
    show; ``error_examples``: one message per error kind.
    """
    report = HtmlReport(f"verigym eval: {config.get('env', '?')} · {config.get('model') or 'default policy'}")
    report.heading("Summary")
    report.table(summary_rows(summary), header=["", "value"])
    ks = sorted((int(k), v) for k, v in summary.get("pass_at_k", {}).items() if v is not None)
    if len(ks) > 1:
        report.raw(
            line_svg([(float(k), float(v)) for k, v in ks], title="pass@k", xlabel="k", ylabel="pass@k")
        )
    report.paragraph(
        "Errored samples are counted apart and left out of every reward statistic; "
        "the 95% interval is a bootstrap over tasks."
    )
    if len(rewards):
        values = np.asarray(rewards, dtype=float)
        bins = min(30, max(5, len(np.unique(values)) * 2))
        counts, edges = np.histogram(values, bins=bins)
        report.raw(
            histogram_svg(
                counts.tolist(),
                edges.tolist(),
                title=f"reward of {len(values)} scored samples",
                xlabel="reward",
                ylabel="samples",
            )
        )
    if summary.get("env_metrics"):  # the benchmark's own metrics under its names (IFEval's four)
        report.heading("Benchmark metrics")
        report.table([(k, _fmt(v)) for k, v in summary["env_metrics"].items()], header=["metric", "value"])
    means = {k: v for k, v in summary.get("grader_means", {}).items() if v is not None}
    if means:
        report.raw(hbars_svg(list(means.items()), xlabel="mean grade (non-errored)"))
    if summary.get("errors_by_kind"):
        report.heading("Errors")
        report.table(
            [(k, n, error_examples.get(k, "")[:200]) for k, n in summary["errors_by_kind"].items()],
            header=["kind", "samples", "example"],
        )
    report.heading("Stop reasons")
    report.table(list(summary.get("stop_reasons", {}).items()), header=["stop reason", "samples"])
    report.heading(f"Trajectories ({len(examples)} of {summary.get('n_samples', len(examples))})")
    for r in examples:
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
