"""How ``verigym eval`` and the commands that are evals with a purpose (``verigym profile``, ``synth``)
run one: ``resolve_config`` merges defaults, a resumed run's saved config, ``--config`` and the flags
into an ``EvalConfig`` (one red line and exit 2 for bad input); ``run_with_progress`` runs a workflow
(``verigym.evaluate``, ``verigym.data.profile``, ...) under a rich progress bar drawn from its
``EvalEvent``s and prints the eval's summary table (exit 1 when every sample errored, or when the errored
samples reach ``verigym eval``'s ``--fail-on-error``; 130 on Ctrl-C).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

import typer

from verigym._cli.common import console, error_line, fail
from verigym._library_output import to_run_dir

if TYPE_CHECKING:
    from verigym.eval.config import EvalConfig
    from verigym.eval.run import EvalResult
    from verigym.eval.workflow import EvalEvent

__all__ = ["Workflow", "exit_for_errors", "resolve_config", "run_with_progress"]

T = TypeVar("T")
# a library workflow started with the progress display's ``on_event``
Workflow = Callable[[Callable[["EvalEvent"], None]], Coroutine[Any, Any, T]]


def _started(out: Path) -> bool:
    """Whether a run in ``out`` got far enough to resume: its config.json or any results exist."""
    results = out / "results.jsonl"
    return (out / "config.json").exists() or (results.exists() and results.stat().st_size > 0)


def resolve_config(
    flags: dict[str, Any], config_file: Path | None, resume: bool
) -> tuple[EvalConfig, dict[str, Any]]:
    from verigym.eval.config import IDENTITY_FIELDS, ConfigError, build, load_saved, load_toml

    try:
        toml = load_toml(config_file) if config_file else {}
        given = {k: v for k, v in flags.items() if v is not None}
        env_args = {**toml.get("env_args", {}), **given.pop("env_args", {})}
        out = given.get("out") or toml.get("out")
        saved: dict[str, Any] = {}
        if resume:
            if not out:
                fail("--resume needs --out DIR (the folder of the run to continue)")
            if _started(Path(out)):
                saved = load_saved(Path(out))
                env_args = {**saved.get("env_args", {}), **env_args}
            else:  # killed before config.json was written: nothing to resume, start afresh
                console.print(f"[yellow]--resume: nothing to resume in {out} yet; starting the run[/]")
        values = {**saved, **toml, **given, "env_args": env_args}
        if not values.get("env"):
            fail("no environment: give ENV (see `verigym envs`) or `env = ...` in --config")
        config = build(values, f"--config {config_file}" if config_file else "eval")
    except ConfigError as exc:
        fail(str(exc))
    if resume:
        for field in IDENTITY_FIELDS:
            before, now = saved.get(field), getattr(config, field)
            if field in saved and before != now:
                fail(
                    f"--resume: {field} was {before!r} in {out}/config.json but is {now!r} now; "
                    "use a new --out to change it"
                )
    return config, saved


def run_with_progress(
    config: EvalConfig,
    out: Path,
    resume: bool,
    workflow: Workflow[T] | None = None,
    eval_of: Callable[[T], EvalResult] | None = None,
    fail_on_error: bool | float = False,
) -> T:
    """``workflow(on_event)`` (default: ``verigym.eval.workflow.aevaluate`` of ``config``) under a
    progress bar drawn from its ``EvalEvent``s, then the eval's summary table; its errors as one red
    line. ``eval_of`` finds the ``EvalResult`` in what the workflow returns (default: it is one).

    Exit 1 once every file is written when the errored samples reach ``fail_on_error``
    (``verigym.eval.run.errors_fail``; ``verigym eval`` passes its config's), or whatever it is
    when every sample errored."""
    to_run_dir(out)
    from rich.markup import escape
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    from verigym._cli._eval_show import print_summary
    from verigym.eval.config import ConfigError
    from verigym.eval.run import errors_fail
    from verigym.eval.store import StoreError
    from verigym.eval.workflow import aevaluate
    from verigym.runner import tuned_gc
    from verigym.types import Record

    progress = Progress(
        SpinnerColumn(),
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]:.1f} rollouts/s"),
        TextColumn("reward {task.fields[reward]}"),
        TextColumn("[red]{task.fields[errors]} errors"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        refresh_per_second=4,
    )
    bar = progress.add_task(f"eval {config.env}", total=None, rate=0.0, reward="–", errors=0)
    stats = {
        "n": 0,
        "sum": 0.0,
        "scored": 0,
        "errors": 0,
        "t0": time.perf_counter(),
        "unshown": 0,
        "shown_at": 0.0,
    }

    def started(total: int, done: int) -> None:
        progress.update(bar, total=total, completed=done)
        stats["t0"] = time.perf_counter()

    def show() -> None:
        now = time.perf_counter()
        reward = f"{stats['sum'] / stats['scored']:.3f}" if stats["scored"] else "–"
        rate = stats["n"] / max(now - stats["t0"], 1e-9)
        progress.update(bar, advance=stats["unshown"], rate=rate, reward=reward, errors=stats["errors"])
        stats["unshown"], stats["shown_at"] = 0, now

    def advance(record: Record) -> None:
        stats["n"] += 1
        stats["unshown"] += 1
        if record.error is None and record.score.reward is not None:
            stats["scored"] += 1
            stats["sum"] += record.score.reward
        else:
            stats["errors"] += 1
        if time.perf_counter() - stats["shown_at"] >= 0.1:  # the bar redraws 4x a second: no need for more
            show()

    stage = "setup"  # then "check" (a served endpoint) and "run" (the bar is up)
    me: asyncio.Task[Any] | None = None

    def on_event(event: EvalEvent) -> None:
        nonlocal stage
        if event.kind == "record" and event.record is not None:
            advance(event.record)
        elif event.kind == "start":
            started(event.total, event.done)
        elif event.kind == "ready":
            stage = "check"
            if me is not None:  # SIGTERM stops the run like Ctrl-C: cancel, keep what is written
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, me.cancel)
        elif event.kind == "running":
            stage = "run"
            progress.start()
        elif event.kind == "policy":  # an in-process model or the environment's own policy
            console.print(f"[yellow]{escape(event.message)}[/]")
        else:  # env_args added for a pretrained model; the served endpoint answered
            console.print(f"[dim]{escape(event.message)}[/]")

    async def main() -> Any:
        nonlocal me
        me = asyncio.current_task()
        if workflow is not None:
            return await workflow(on_event)
        return await aevaluate(config.env, None, config, out=out, resume=resume, on_event=on_event)

    def end_bar() -> None:
        show()
        progress.stop()

    try:
        with tuned_gc():
            done = asyncio.run(main())
    except (ConfigError, StoreError) as exc:  # StoreError: a results file that is not ours, with its line
        if stage == "check":  # the endpoint: its line, then the (never started) bar ends
            error_line(str(exc))
            end_bar()
            raise typer.Exit(2) from None
        if stage == "run":
            end_bar()
        fail(str(exc))
    except BaseException as exc:
        if stage == "setup":
            raise
        end_bar()
        if isinstance(exc, OSError):  # the output folder is unwritable, the disk is full...
            fail(f"--out {out}: {exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else ""))
        if isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError)):
            console.print(
                f"[yellow]interrupted:[/] {stats['n']} new samples are saved in {out / 'results.jsonl'}; "
                f"continue with: [bold]verigym eval --out {out} --resume[/]",
                soft_wrap=True,
            )
            raise typer.Exit(130) from None
        raise
    end_bar()
    result: EvalResult = eval_of(done) if eval_of is not None else done
    print_summary(result, console)
    summary = result.summary
    if summary["n_samples"] and not summary["n_scored"]:
        console.print(
            "[bold red]every sample errored[/]; see the errors above and report.html", highlight=False
        )
        raise typer.Exit(1)
    if errors_fail(summary, fail_on_error):
        exit_for_errors(
            f"{summary['n_errors']} of {summary['n_samples']} samples errored",
            fail_on_error,
            "results, summary and report are all written",
        )
    return cast("T", done)


def exit_for_errors(what: str, fail_on_error: bool | float, written: str) -> NoReturn:
    """Exit 1 for errored samples that reached ``fail_on_error``, once every file is written: one
    red line saying ``what`` errored, the threshold with the flags that change it, and ``written``
    (``verigym eval`` for one environment, ``verigym suite`` for its members)."""
    console.print(
        f"[bold red]exit 1[/]: {what} and {_threshold(fail_on_error)}; {written}",
        highlight=False,
        soft_wrap=True,
    )
    raise typer.Exit(1)


def _threshold(fail_on_error: bool | float) -> str:
    """``fail_on_error`` in words, with the flags that change it."""
    if fail_on_error is True:
        return (
            "any errored sample fails an eval (--fail-on-error N or F tolerates some, --no-fail-on-error all)"
        )
    if fail_on_error < 1:
        return f"--fail-on-error {fail_on_error:g} fails an eval at that share of its samples"
    return f"--fail-on-error {fail_on_error:g} fails an eval at that many errored samples"
