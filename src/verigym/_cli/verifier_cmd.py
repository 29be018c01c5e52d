"""``verigym verifier-bench``: a grader family's false-positive and false-negative rates on a suite.

Runs ``verigym.graders.bench.run_bench`` under a progress bar, prints a summary table and the
misses (or one JSON object with ``--json``). Bad input (unknown family, malformed suite line) is
one red line and exit code 2.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from verigym._cli.common import console, fail

__all__ = ["register"]


def _pct(num: int, den: int) -> str:
    return f"{num / den:.1%} ({num}/{den})" if den else "n/a (0/0)"


def verifier_bench(
    grader: Annotated[
        str,
        typer.Option(
            "--grader",
            "-g",
            help="Grader family: math, code, swe, toolcall, instructions, schema, judge, format, length, "
            "hacking, or an environment's own (repo_fix); or a dotted module path declaring one.",
        ),
    ],
    suite: Annotated[
        Path,
        typer.Option(
            "--suite",
            "-s",
            help='Labeled JSONL suite: each line has "id" and "label": true/false or "expect": "pass"/"fail".',
        ),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")] = False,
    mode: Annotated[
        str | None,
        typer.Option(
            "--mode",
            help="Strictness mode for lines that do not set one (math: equivalent, simplest_form, "
            "exact_decimal:N, with_units).",
        ),
    ] = None,
    show: Annotated[int, typer.Option("--show", help="How many misses to list (0: none).", min=0)] = 50,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs",
            "-j",
            help="Lines checked at once, in that many processes, each warmed up before the clock "
            "starts (checks/s is then parallel throughput).",
            min=1,
        ),
    ] = 1,
) -> None:
    """Measure a grader family on a labeled suite: FP rate, FN rate, accuracy, errors, checks/s."""
    from verigym.envs.registry import EnvError, load_grader_family
    from verigym.graders.bench import BenchError, run_bench
    from verigym.graders.code.sandbox import SandboxUnavailable
    from verigym.graders.families import UnknownFamilyError

    try:
        load_grader_family(grader)  # an unknown or broken family fails here, in one line
        if mode is not None and grader == "math":
            from verigym.graders.math import parse_mode

            parse_mode(mode)
        if as_json:
            result = run_bench(grader, suite, mode=mode, jobs=jobs)  # by name: --jobs runs processes
        else:
            with Progress(
                TextColumn(f"[bold]{grader}[/] on {suite.name}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            ) as bar:
                task = bar.add_task("checks", total=None)
                result = run_bench(
                    grader,
                    suite,
                    mode=mode,
                    jobs=jobs,
                    progress=lambda d, t: bar.update(task, completed=d, total=t),
                )
    except (BenchError, UnknownFamilyError, EnvError, ValueError, SandboxUnavailable) as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps(result.to_json()))
        return
    table = Table(title=f"verifier-bench: {grader} on {suite.name}", show_header=False)
    table.add_column("metric", style="bold")
    table.add_column("value")
    table.add_row("n", f"{result.n} ({result.positives} right, {result.negatives} wrong)")
    table.add_row("FP rate (wrong accepted)", _pct(len(result.false_positives), result.negatives))
    table.add_row("FN rate (right rejected)", _pct(len(result.false_negatives), result.positives))
    table.add_row("accuracy", f"{result.accuracy:.1%}")
    table.add_row("errors", str(len(result.errors)))
    table.add_row("checks/s", f"{result.checks_per_s:.1f}")
    console.print(table)
    misses = [o for o in result.outcomes if not o.correct]
    if misses and show:
        console.print(f"[bold]misses[/] ({len(misses)}):")
        for o in misses[:show]:
            kind = "error" if o.error else ("false positive" if o.accepted else "false negative")
            extra = f": {o.error}" if o.error else ""
            console.print(f"  {o.id}  [yellow]{kind}[/]{extra}", highlight=False)
        if len(misses) > show:
            console.print(f"  ... and {len(misses) - show} more (use --show or --json)")


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app``."""
    app.command("verifier-bench")(verifier_bench)
