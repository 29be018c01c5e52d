"""``verigym eval ENV``: evaluate a model on an environment; writes results, config, summary, report.

The command resolves its configuration (defaults < saved config of a resumed run < ``--config``
< flags) and hands it to the library's ``verigym.eval.workflow.aevaluate`` (environment, penalties
and MCP tools, tasks, policy, endpoint check, the run), showing its events as a rich progress bar and
the summary as a table. Bad input is one red line and exit 2.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from verigym._cli._agentic_opts import (
    AGENT_CMD_HELP,
    AGENT_HELP,
    MCP_HELP,
    ON_ERROR_HELP,
    PENALTY_HELP,
    extend_config,
)
from verigym._cli.common import (
    DTYPE_HELP,
    TOOL_FORMAT_HELP,
    EnvArg,
    Threads,
    console,
    error_line,
    fail,
    parse_kv,
    set_threads,
)
from verigym._library_output import to_run_dir

if TYPE_CHECKING:
    from verigym.eval.config import EvalConfig

__all__ = ["register"]


def _started(out: Path) -> bool:
    """Whether a run in ``out`` got far enough to resume: its config.json or any results exist."""
    results = out / "results.jsonl"
    return (out / "config.json").exists() or (results.exists() and results.stat().st_size > 0)


def _resolve(
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


def _run(config: EvalConfig, out: Path, resume: bool) -> None:
    """``verigym.eval.workflow.aevaluate`` under a progress bar; its errors as one red line."""
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
    from verigym.eval.run import EvalResult
    from verigym.eval.store import StoreError
    from verigym.eval.workflow import EvalEvent, aevaluate
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

    async def main() -> EvalResult:
        nonlocal me
        me = asyncio.current_task()
        return await aevaluate(config.env, None, config, out=out, resume=resume, on_event=on_event)

    def end_bar() -> None:
        show()
        progress.stop()

    try:
        with tuned_gc():
            result = asyncio.run(main())
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
    print_summary(result, console)
    if result.summary["n_samples"] and not result.summary["n_scored"]:
        console.print(
            "[bold red]every sample errored[/]; see the errors above and report.html", highlight=False
        )
        raise typer.Exit(1)


def _flag(*names: str, help: str) -> Any:
    """An option that is unset (None) unless given, so that --config and a resumed run's saved config
    can fill it (precedence: defaults < saved config < --config < flags)."""
    return typer.Option(None, *names, help=help)


def register(app: typer.Typer) -> None:
    """Add ``verigym eval`` to ``app``."""

    @app.command("eval")
    def eval_command(
        env: str | None = typer.Argument(
            None, help="Environment: a name from `verigym envs`, or module:attr / file.py:attr."
        ),
        model: str | None = _flag(
            "--model",
            "-m",
            help="Model name at --base-url; without it a local model directory or a catalogue name "
            "(`verigym models pull NAME`, e.g. smollm2-135m-instruct).",
        ),
        base_url: list[str] | None = _flag(
            "--base-url",
            help="OpenAI-compatible endpoint; repeat to load-balance one model over several.",
        ),
        api_key_env: str | None = _flag(
            "--api-key-env", help="Name of the environment variable that holds the API key."
        ),
        dtype: str | None = _flag("--dtype", help=DTYPE_HELP),
        tool_format: str | None = _flag("--tool-format", help=TOOL_FORMAT_HELP),
        policy: str | None = _flag(
            "--policy",
            help="oracle or null: the environment's own policy instead of a model (no --model/"
            "--base-url), through the same results, summary and report (e.g. HumanEval's canonical "
            "solutions: `verigym eval humaneval --policy oracle -n 164`).",
        ),
        num_tasks: int | None = _flag("-n", "--num-tasks", help="Number of tasks (default 50)."),
        samples_per_task: int | None = _flag(
            "-k",
            "--samples-per-task",
            help="Samples per task; pass@k is reported for k=1..K (default 1).",
        ),
        concurrency: int | None = _flag(
            "--concurrency",
            help="Rollouts in flight at once (also per-endpoint requests) (default 32).",
        ),
        temperature: float | None = _flag("--temperature", help="Sampling temperature (default 1.0)."),
        max_tokens: int | None = _flag("--max-tokens", help="Max tokens per model completion (default 512)."),
        seed: int | None = _flag("--seed", help="Seed of the tasks and of each sample (default 0)."),
        env_arg: EnvArg = None,
        out: Path | None = _flag("--out", help="Output folder (default runs/<env>-<time>)."),
        resume: bool = typer.Option(
            False, "--resume", help="Continue the run in --out: skip finished samples, redo errored ones."
        ),
        config: Path | None = _flag(
            "--config",
            help="TOML file with these options (long names, underscores); flags override it.",
        ),
        harness: str | None = _flag("--harness", help="Harness variant, passed as env arg harness=."),
        tool_variant: int | None = _flag(
            "--tool-variant", help="Tool-set variation seed, passed as env arg tool_variant=."
        ),
        suite: str | None = _flag(
            "--suite", help="Evaluate a suite of environments (e.g. holistic) into one scorecard."
        ),
        mcp: list[str] | None = _flag("--mcp", help=MCP_HELP),
        penalty: list[str] | None = _flag("--penalty", help=PENALTY_HELP),
        agent: str | None = _flag("--agent", help=AGENT_HELP),
        agent_cmd: str | None = _flag("--agent-cmd", help=AGENT_CMD_HELP),
        agent_timeout_s: float | None = _flag(
            "--agent-timeout", help="Wall-clock limit of one run of the agent program, seconds (default 300)."
        ),
        on_error: str | None = _flag("--on-error", help=ON_ERROR_HELP),
        threads: Threads = None,
    ) -> None:
        """Evaluate a model on an environment: results.jsonl, config.json, summary.json, report.html."""
        set_threads(threads)
        env_args = parse_kv(env_arg, "--env-arg")
        if harness is not None:
            env_args["harness"] = harness
        if tool_variant is not None:
            env_args["tool_variant"] = tool_variant
        flags = {
            "env": env,
            "model": model,
            "base_url": base_url or None,
            "api_key_env": api_key_env,
            "dtype": dtype,
            "tool_format": tool_format,
            "policy": policy,
            "num_tasks": num_tasks,
            "samples_per_task": samples_per_task,
            "concurrency": concurrency,
            "temperature": temperature,
            "max_tokens": max_tokens,
            "seed": seed,
            "out": str(out) if out else None,
            "env_args": env_args,
            "agent": agent,
            "agent_cmd": agent_cmd,
            "agent_timeout_s": agent_timeout_s,
            "on_error": on_error,
        }
        if suite is not None:  # one scorecard over a named set of environments
            from verigym._cli.collection_cmd import run_suite_command

            if env is not None:
                fail("give either ENV or --suite, not both")
            if mcp or penalty:
                fail("--mcp and --penalty apply to one environment, not to --suite")
            cfg, _ = _resolve({**flags, "env": suite}, config, resume)
            run_suite_command(suite, cfg, policy_kind=cfg.policy, resume=resume)
            return
        cfg, _ = _resolve(flags, config, resume)
        cfg = extend_config(cfg, mcp, penalty)
        if cfg.out is None:
            from verigym.eval.workflow import default_out

            cfg = cfg.model_copy(update={"out": default_out(cfg.env)})
        assert cfg.out is not None
        _run(cfg, Path(cfg.out), resume)
        sys.stdout.flush()
