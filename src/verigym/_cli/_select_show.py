"""Console output of ``verigym select``: the summary table."""

from __future__ import annotations

from typing import Any

from verigym._cli.common import console

__all__ = ["print_table"]


def _short(verdict: str) -> str:
    """A table-width form of a verdict (summary.json keeps the full sentence)."""
    if verdict.startswith("does NOT beat majority ("):
        return "[red]worse[/] (majority@max is cheaper)"
    if verdict.startswith("beats majority@"):
        return "better than majority@max, more tokens"
    return {
        "beats majority": "[green]better[/]",
        "does NOT beat majority": "[red]worse[/]",
        "ties majority": "tie",
    }.get(verdict, verdict)


def print_table(summary: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title=f"verigym select — {summary['env']} ({summary['tasks']} tasks)")
    for col in ("method", "N", "accuracy", "tokens/task", "fallbacks", "vs majority at equal tokens"):
        table.add_column(col)
    verdicts = {(c["method"], c["n"]): c["verdict"] for c in summary["vs_majority_at_equal_tokens"]}
    for method, rows in summary["methods"].items():
        for r in rows:
            table.add_row(
                method,
                str(r["n"]),
                f"{r['accuracy']:.3f}",
                f"{r['tokens_per_task']:.0f}",
                str(r["fallbacks"]),
                _short(verdicts.get((method, r["n"]), "—")),
            )
    console.print(table)
    for o in summary["deepconf_online_vs_majority"]:
        ok = "[green]yes[/]" if o["reaches_majority_with_fewer_tokens"] else "[red]no[/]"
        console.print(
            f"deepconf-online@{o['n']}: {o['online_accuracy']:.3f} vs majority {o['majority_accuracy']:.3f}, "
            f"{o['tokens_saved_pct']:.1f}% fewer tokens — reaches majority with fewer tokens: {ok}"
        )
