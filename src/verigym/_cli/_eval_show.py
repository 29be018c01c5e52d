"""The end-of-run summary of ``verigym eval`` (rich): the table, then the errored samples grouped by
kind with each kind's first reason."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from verigym.eval.run import EvalResult

__all__ = ["errored_line", "print_summary", "reason_lines"]


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def errored_line(summary: dict[str, Any]) -> str | None:
    """``N of M samples errored (first: ...)`` for a summary with errored samples, else None."""
    n = int(summary.get("n_errors") or 0)
    if not n:
        return None
    first = summary.get("first_error") or ", ".join(
        f"{kind} x{count}" for kind, count in summary.get("errors_by_kind", {}).items()
    )
    return f"{n} of {summary['n_samples']} samples errored (first: {first})"


def reason_lines(summary: dict[str, Any], width: int = 160) -> list[str]:
    """The errored samples grouped by kind, one line each with its count and first reason
    (``  grader: 3 samples, e.g. crashes: ZeroDivisionError: division by zero``); [] without errors."""
    examples = summary.get("error_examples") or {}
    lines = []
    for kind, n in (summary.get("errors_by_kind") or {}).items():
        reason = " ".join(str(examples.get(kind) or "no reason recorded").split())  # one line
        text = f"  {kind}: {n} sample{'s' if n != 1 else ''}, e.g. {reason}"
        lines.append(text if len(text) <= width else text[: width - 3] + "...")
    return lines


def print_summary(result: EvalResult, console: Console) -> None:
    """Print the summary of ``result`` as a table and where its files are."""
    s = result.summary
    table = Table(title=f"eval summary · {result.out}", show_header=False)
    table.add_column("metric", style="bold")
    table.add_column("value")
    table.add_row("tasks", str(s["n_tasks"]))
    table.add_row("samples (scored / errored)", f"{s['n_samples']} ({s['n_scored']} / {s['n_errors']})")
    if s.get("empty_answers"):
        table.add_row("[yellow]empty answers[/] (scored as wrong)", f"[yellow]{s['empty_answers']}[/]")
    else:
        table.add_row("empty answers", str(s.get("empty_answers", 0)))
    if s["n_samples"] < s.get("n_expected", s["n_samples"]):
        table.add_row("missing samples", f"[red]{s['n_expected'] - s['n_samples']}[/]")
    ci = s.get("reward_ci95")
    ci_text = f"  95% CI [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
    table.add_row("reward mean", _fmt(s["reward_mean"]) + ci_text)
    for k, v in s["pass_at_k"].items():
        table.add_row(f"pass@{k}", _fmt(v))
    for name, v in s["grader_means"].items():
        table.add_row(f"grader {name}", _fmt(v))
    for name, v in s.get("env_metrics", {}).items():  # a benchmark's own metrics (IFEval's four)
        table.add_row(f"[bold cyan]{name}[/]", _fmt(v))
    for kind, n in s["errors_by_kind"].items():
        table.add_row(f"[red]errors: {kind}[/]", str(n))
    table.add_row(
        "completion tokens mean / max",
        f"{_fmt(s['completion_tokens_mean'])} / {_fmt(s['completion_tokens_max'])}",
    )
    table.add_row("truncation rate", _fmt(s["truncation_rate"]))
    if s.get("tool_call_parse_failure_rate") is not None:
        table.add_row("tool-call parse failures", _fmt(s["tool_call_parse_failure_rate"]))
    table.add_row("tokens used", str(s["total_tokens"]))
    table.add_row("wall time (s)", _fmt(s["wall_s"]))
    if result.skipped:
        table.add_row("resumed", f"{result.skipped} kept, {result.written} new")
    console.print(table)
    if line := errored_line(s):
        console.print(line, style="yellow", markup=False, soft_wrap=True)
        for reason in reason_lines(s):
            console.print(reason, style="yellow", markup=False, soft_wrap=True)
    console.print(
        f"results: {result.out / 'results.jsonl'}  summary: {result.out / 'summary.json'}  "
        f"report: {result.out / 'report.html'}",
        soft_wrap=True,
        highlight=False,
    )
