"""``verigym compare``, ``verigym suite`` and ``verigym init``: the environment-collection commands.

- ``compare RUN_A RUN_B``: per-task and overall reward deltas of two eval runs with a paired
  bootstrap CI; writes an HTML comparison (``verigym.eval.compare``).
- ``suite NAME`` (also reachable as ``verigym eval --suite NAME``): every environment of a suite
  evaluated into ``OUT/<env>/`` plus ``OUT/scorecard.json`` / ``scorecard.html``.
- ``init NAME``: writes a pip-installable third-party environment package.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.markup import escape

from verigym._cli.common import (
    BaseUrl,
    Dtype,
    MaxTokens,
    Temperature,
    Threads,
    ToolFormat,
    console,
    eval_policy,
    fail,
    parse_kv,
    set_threads,
)

if TYPE_CHECKING:
    from verigym.eval.config import EvalConfig

__all__ = [
    "compare_command",
    "init_command",
    "register",
    "run_suite_command",
    "suite_command",
    "write_package",
]

_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")


def write_package(name: str, parent: Path, *, force: bool = False, agent: bool = False) -> Path:
    """Write the package for environment ``name`` (with ``agent``: around an agent program) into
    ``parent/name``; returns that folder.

    Raises ``ValueError`` for a bad name and ``FileExistsError`` when the folder is not empty.
    """
    from verigym._cli._init_templates import AGENT_TEMPLATES, TEMPLATES

    if not _NAME.match(name):
        raise ValueError(
            f"environment name {name!r} must be lowercase letters, digits, '-' or '_' and start with a letter"
        )
    package = name.replace("-", "_")
    cls = "".join(part.capitalize() for part in package.split("_")) + "Env"
    root = parent / name
    if root.exists() and any(root.iterdir()) and not force:
        raise FileExistsError(f"{root} already exists and is not empty (use --force to overwrite)")
    for rel, text in (AGENT_TEMPLATES if agent else TEMPLATES).items():
        path = root / rel.format(package=package)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.format(name=name, package=package, cls=cls), encoding="utf-8")
    return root


def run_suite_command(suite: str, config: EvalConfig, *, policy_kind: str | None, resume: bool) -> None:
    """Run a suite from the CLI with a progress bar and print the scorecard table."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from verigym.eval.suites import SuiteError, run_suite, suite_members

    try:
        members = suite_members(suite)
    except SuiteError as exc:
        fail(str(exc))
    out = Path(config.out or f"runs/suite-{suite}-{time.strftime('%Y%m%d-%H%M%S')}")
    policy: Any
    record = None
    if policy_kind is None and not config.base_url:  # an in-process checkpoint: what it was trained with
        from verigym.policies.default import find_record
        from verigym.policies.trained import RecordError

        try:
            record = find_record(config.model)
        except RecordError as exc:
            fail(f"--model {config.model}: {exc}")
    if policy_kind is not None:
        if policy_kind not in ("oracle", "null"):
            fail(f"--policy must be oracle or null, got {policy_kind!r}")
        policy = policy_kind
    else:
        policy, description, _ = eval_policy(config)
        console.print(f"[dim]policy: {description}[/]")
    progress = Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console,
    )  # fmt: skip
    bar = progress.add_task(f"suite {suite}", total=len(members))

    def on_env(name: str, i: int, n: int) -> None:
        progress.update(bar, completed=i, description=f"suite {suite}: {name}")

    async def main() -> dict[str, Any]:
        try:
            progress.start()
            return await run_suite(
                suite, policy, config, out=out, resume=resume, env_overrides=config.env_args, on_env=on_env,
                record=record, on_message=lambda line: progress.console.print(f"[dim]{escape(line)}[/]"),
            )  # fmt: skip
        finally:
            progress.update(bar, completed=len(members))
            progress.stop()
            close = getattr(policy, "aclose", None)
            if close is not None:
                await close()

    card = asyncio.run(main())
    table = Table(title=f"suite {suite}")
    for col in ("environment", "reward", "pass@1", "errors"):
        table.add_column(col)
    for row in card["envs"]:
        reward = "–" if row["reward_mean"] is None else f"{row['reward_mean']:.3f}"
        p1 = (row.get("pass_at_k") or {}).get("1")
        errors = f"[red]{row['error'][:70]}[/]" if row["error"] else str(row.get("n_errors", 0))
        table.add_row(row["env"], reward, "–" if p1 is None else f"{p1:.3f}", errors)
    console.print(table)
    console.print(f"scorecard: {out / 'scorecard.json'} and {out / 'scorecard.html'}")
    failing = [row["env"] for row in card["envs"] if _member_fails(row, config.fail_on_error)]
    if failing:  # as `verigym eval` does for one environment, once the scorecard is written
        from verigym._cli._eval_run import exit_for_errors

        exit_for_errors(
            f"{', '.join(failing)} did not run or had errored samples",
            config.fail_on_error,
            "the scorecard and every member's files are written",
        )


def _member_fails(row: dict[str, Any], fail_on_error: bool | float) -> bool:
    """A suite member that did not run at all (every sample lost), or whose errored samples reach
    ``fail_on_error`` (``verigym.eval.run.errors_fail``, as for one eval)."""
    from verigym.eval.run import errors_fail

    if row["error"]:
        return True
    samples, errors = int(row.get("n_samples") or 0), int(row.get("n_errors") or 0)
    return errors_fail(
        {"n_samples": samples, "n_errors": errors, "n_scored": samples - errors}, fail_on_error
    )


def compare_command(
    run_a: Path = typer.Argument(..., help="First eval run: its --out folder or results.jsonl."),
    run_b: Path = typer.Argument(..., help="Second eval run, compared as B - A."),
    out: Path | None = typer.Option(None, "--out", help="HTML file to write [default: RUN_B/compare.html]."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap resampling."),
    show: int = typer.Option(10, "--show", help="How many tasks with the largest |delta| to print."),
) -> None:
    """Compare two eval runs task by task: deltas with a paired bootstrap CI and an HTML page."""
    from rich.table import Table

    from verigym.eval.compare import compare_runs, write_comparison
    from verigym.eval.store import StoreError
    from verigym.record import RunFormatError

    try:
        comp = compare_runs(run_a, run_b, seed=seed)
    except (FileNotFoundError, StoreError, RunFormatError) as exc:
        fail(str(exc))
    if not comp.tasks:
        fail(f"{run_a} and {run_b} share no scored task: nothing to compare")
    table = Table(title=f"per task (B - A), {show} largest changes of {len(comp.tasks)}")
    for col in ("task", "A", "B", "delta"):
        table.add_column(col)
    for t in sorted(comp.tasks, key=lambda t: -abs(t.delta))[:show]:
        color = "green" if t.delta > 0 else "red" if t.delta < 0 else "white"
        table.add_row(t.task_id, f"{t.a:.3f}", f"{t.b:.3f}", f"[{color}]{t.delta:+.3f}[/]")
    console.print(table)
    assert comp.ci95 is not None and comp.delta is not None
    console.print(
        f"overall: A {comp.mean_a:.3f}  B {comp.mean_b:.3f}  delta [bold]{comp.delta:+.3f}[/] "
        f"(95% paired bootstrap CI [{comp.ci95[0]:+.3f}, {comp.ci95[1]:+.3f}], "
        f"P(B not better) {comp.p_b_not_better:.3f}) over {len(comp.tasks)} paired tasks; "
        f"errored samples A {comp.errors_a}, B {comp.errors_b}",
        highlight=False,
    )
    for name, d in comp.grader_deltas.items():
        console.print(f"  grader {name}: {d:+.3f}", highlight=False)
    target = out or ((run_b if run_b.is_dir() else run_b.parent) / "compare.html")
    write_comparison(comp, target)
    console.print(f"wrote {target}")


def suite_command(
    name: str = typer.Argument(..., help="Suite name (holistic, agentic, reasoning, smoke) or env1,env2,..."),
    model: str | None = typer.Option(None, "--model", "-m", help="Model name at --base-url (or local path)."),
    base_url: BaseUrl = None,
    api_key_env: str | None = typer.Option(None, "--api-key-env", help="Variable holding the API key."),
    policy: str | None = typer.Option(
        None, "--policy", help="oracle or null: each env's own policy (a self-check)."
    ),
    num_tasks: int = typer.Option(20, "-n", "--num-tasks", help="Tasks per environment."),
    samples_per_task: int = typer.Option(1, "-k", "--samples-per-task", help="Samples per task (pass@k)."),
    temperature: Temperature = 1.0,
    max_tokens: MaxTokens = 512,
    concurrency: int = typer.Option(32, "--concurrency", help="Rollouts in flight at once."),
    seed: int = typer.Option(0, "--seed", help="Seed of tasks and samples."),
    env_arg: list[str] | None = typer.Option(
        None, "--env-arg", help="key=value given to every env; repeatable."
    ),
    out: Path | None = typer.Option(None, "--out", help="Output folder [default: runs/suite-NAME-<time>]."),
    resume: bool = typer.Option(False, "--resume", help="Continue the runs in --out."),
    threads: Threads = None,
    dtype: Dtype = None,
    tool_format: ToolFormat = None,
    no_fail_on_error: bool = typer.Option(
        False,
        "--no-fail-on-error",
        help="Exit 0 however many samples errored (by default any errored sample, or a member that did "
        "not run, exits 1 once the scorecard is written; `verigym eval --suite --fail-on-error` takes a "
        "threshold). A member that did not run at all still exits 1.",
    ),
) -> None:
    """Evaluate a suite of environments and write one scorecard (JSON + HTML with a radar plot)."""
    set_threads(threads)
    from verigym.eval.config import ConfigError, build

    try:
        config = build(
            {
                "env": name, "model": model, "base_url": base_url or [], "api_key_env": api_key_env,
                "num_tasks": num_tasks, "samples_per_task": samples_per_task, "temperature": temperature,
                "max_tokens": max_tokens, "concurrency": concurrency, "seed": seed,
                "out": str(out) if out else None, "env_args": parse_kv(env_arg, "--env-arg"),
                "dtype": dtype, "tool_format": tool_format, "fail_on_error": not no_fail_on_error,
            },
            "suite",
        )  # fmt: skip
    except ConfigError as exc:
        fail(str(exc))
    run_suite_command(name, config, policy_kind=policy, resume=resume)


def init_command(
    name: str = typer.Argument(..., help="Environment name (lowercase, e.g. my-env); also the folder name."),
    parent: Path = typer.Option(Path("."), "--dir", help="Folder to create the package in."),
    force: bool = typer.Option(False, "--force", help="Overwrite files in an existing folder."),
    agent: bool = typer.Option(
        False, "--agent", help="A package around an agent program (an openai-SDK loop to edit) instead."
    ),
) -> None:
    """Write a pip-installable environment package: entry point, env module, check-env test, README
    (with --agent: an agent program verigym runs as it is)."""
    try:
        root = write_package(name, parent, force=force, agent=agent)
    except (ValueError, FileExistsError) as exc:
        fail(str(exc))
    console.print(f"wrote [bold]{root}[/]: pyproject.toml, src/, tests/, README.md")
    if agent:
        module = name.replace("-", "_")
        console.print(
            f"next: cd {root} && pip install -e . && verigym eval calc --agent {module}.agent:agent"
        )
    else:
        console.print(f"next: cd {root} && pip install -e . && verigym check-env {name}")


def register(app: typer.Typer) -> None:
    """Add ``compare``, ``suite`` and ``init`` to ``app``."""
    app.command("compare")(compare_command)
    app.command("suite")(suite_command)
    app.command("init")(init_command)
