"""``verigym select ENV``: compare test-time selection methods (majority, DeepConf offline and
online, GenSelect, best-of-N) by accuracy against samples and against tokens.

The command checks its flags into a ``SelectConfig`` and model specs and hands them to the library's
``verigym.select.workflow.arun_selection`` (environment, tasks, model, judge, grader, endpoint check,
the experiment: samples once at the largest N through the runner, sub-samples for smaller N, and
writes ``results.jsonl``, ``summary.json`` and ``report.html`` to ``--out``), drawing its events as
a progress bar and the summary as a table. Bad input is one red line and exit 2.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer
from rich.markup import escape

from verigym._cli._select_show import print_table
from verigym._cli.common import (
    BaseUrl,
    Dtype,
    EnvArg,
    Threads,
    ToolFormat,
    console,
    fail,
    model_spec,
    parse_kv,
    set_threads,
)
from verigym.select.methods import method_names

if TYPE_CHECKING:
    from verigym.select import TraceScore

__all__ = ["register", "select_command"]


def _methods(values: list[str] | None) -> list[str]:
    out: list[str] = []
    for value in values or ["majority,deepconf,deepconf-online"]:
        for m in (v.strip() for v in value.split(",")):
            if not m:
                continue
            if m not in method_names():
                fail(
                    f"--method {m!r}: expected one of {', '.join(method_names())} (repeat it or give a comma list)"
                )
            if m not in out:
                out.append(m)
    return out


def _ns(samples: int, given: str | None) -> list[int]:
    if given:
        try:
            ns = sorted({int(x) for x in given.split(",") if x.strip()})
        except ValueError:
            fail(f"--ns {given!r}: expected a comma list of positive integers, e.g. 1,4,16")
        if not ns or ns[0] < 1 or ns[-1] > samples:
            fail(f"--ns {given!r}: every N must be between 1 and --samples ({samples})")
        return ns
    ns, n = [], 1
    while n < samples:
        ns.append(n)
        n *= 4
    return [*ns, samples]


def select_command(
    env: str = typer.Argument(..., help="Environment name (see `verigym envs`)."),
    method: list[str] | None = typer.Option(
        None,
        "--method",
        help=f"Method(s): {', '.join(method_names())}; repeat or comma list (default: majority,deepconf,deepconf-online).",
    ),
    samples: int = typer.Option(16, "--samples", "-N", min=1, help="Largest N: samples drawn per task."),
    ns: str | None = typer.Option(
        None, "--ns", help="Comma list of N to report (default: 1,4,16,... and --samples)."
    ),
    model: str | None = typer.Option(
        None, "--model", "-m", help="Model name at --base-url, or a local model path without it."
    ),
    base_url: BaseUrl = None,
    api_key_env: str | None = typer.Option(
        None, "--api-key-env", help="Environment variable holding the API key."
    ),
    judge_model: str | None = typer.Option(
        None,
        "--judge-model",
        help="Selector/reward model for genselect and best-of-n (default: the sampled model).",
    ),
    judge_base_url: list[str] | None = typer.Option(
        None, "--judge-base-url", help="Endpoint of --judge-model (default: --base-url)."
    ),
    num_tasks: int = typer.Option(50, "-n", "--num-tasks", min=1, help="Number of tasks."),
    concurrency: int = typer.Option(128, "--concurrency", min=1, help="Rollouts in flight at once."),
    temperature: float = typer.Option(1.0, "--temperature", min=0.0, help="Sampling temperature."),
    max_tokens: int = typer.Option(512, "--max-tokens", min=1, help="Max tokens per completion."),
    seed: int = typer.Option(0, "--seed", help="Seed of tasks, samples, sub-sampling and fallbacks."),
    env_arg: EnvArg = None,
    eta: float = typer.Option(
        0.1,
        "--eta",
        min=0.0,
        max=1.0,
        help="DeepConf: fraction of most confident traces kept (0.1 low, 0.9 high).",
    ),
    score: str = typer.Option(
        "lowest", "--score", help="DeepConf trace score: lowest, bottom10, tail or mean."
    ),
    window: int = typer.Option(2048, "--window", min=1, help="DeepConf: largest group window in tokens."),
    fraction: float = typer.Option(
        0.25,
        "--window-fraction",
        min=0.0,
        help="DeepConf: window = min(--window, fraction × median length); 0 = fixed.",
    ),
    top_k: int = typer.Option(
        20, "--top-k", min=1, help="DeepConf: top-k logprobs per token for confidences."
    ),
    warmup: int | None = typer.Option(
        None, "--warmup", min=1, help="DeepConf-online warm-up traces (default: min(16, N/4))."
    ),
    draws: int = typer.Option(
        4, "--draws", min=1, help="Disjoint sub-samples averaged for each N below --samples."
    ),
    genselect_window: int = typer.Option(
        8, "--genselect-window", min=2, help="GenSelect: candidates shown at once."
    ),
    judge_max_tokens: int = typer.Option(
        256, "--judge-max-tokens", min=1, help="Max tokens of each selector/reward-model reply."
    ),
    bon_grader: str | None = typer.Option(
        None,
        "--bon-grader",
        help="best-of-n scores with this Grader (module:attr, a Grader or a (task, trajectory) function) "
        "instead of a reward-model policy.",
    ),
    success_threshold: float = typer.Option(
        1.0, "--success-threshold", help="A sample is correct when its reward is at least this."
    ),
    out: Path | None = typer.Option(None, "--out", help="Output folder (default: runs/select-<env>-<time>)."),
    threads: Threads = None,
    dtype: Dtype = None,
    tool_format: ToolFormat = None,
) -> None:
    """Compare selection methods: accuracy vs samples and vs tokens; summary.json and report.html."""
    set_threads(threads)
    from verigym.select.methods import SelectConfig, needs_judge
    from verigym.select.workflow import default_select_out
    from verigym.types import Sampling

    methods = _methods(method)
    if score not in ("lowest", "bottom10", "tail", "mean"):
        fail(f"--score {score!r}: expected lowest, bottom10, tail or mean")
    if eta <= 0:
        fail("--eta must be above 0 (the fraction of traces kept)")
    n_list = _ns(samples, ns)
    env_args = parse_kv(env_arg, "--env-arg")
    values: dict[str, Any] = {"model": model, "base_url": base_url or [], "api_key_env": api_key_env}
    spec = model_spec(
        values | {"concurrency": concurrency, "dtype": dtype or "auto", "tool_format": tool_format}
    )
    judge = None  # the sampled model, when a method needs a judge
    if (judge_model is not None or judge_base_url is not None) and (
        needs_judge(methods) and not (methods == ["best-of-n"] and bon_grader)
    ):
        judged = {
            "model": judge_model,
            "base_url": judge_base_url or base_url or [],
            "api_key_env": api_key_env,
        }
        judge = model_spec(judged | {"concurrency": concurrency, "dtype": "auto"})
    cfg = SelectConfig(
        methods=methods,
        ns=n_list,
        draws=draws,
        seed=seed,
        eta=eta,
        score=cast("TraceScore", score),
        window=window,
        fraction=fraction,
        k=top_k,
        warmup=warmup,
        genselect_window=genselect_window,
        judge_sampling=Sampling(temperature=0.0, max_tokens=judge_max_tokens, seed=seed),
        success_threshold=success_threshold,
    )
    _run(
        env,
        spec,
        judge,
        cfg,
        bon_grader=bon_grader,
        env_args=env_args,
        num_tasks=num_tasks,
        sampling=Sampling(temperature=temperature, max_tokens=max_tokens, seed=seed),
        concurrency=concurrency,
        out=out or default_select_out(env),
    )


def _run(
    env: str,
    model: Any,
    judge: Any,
    cfg: Any,
    *,
    bon_grader: str | None,
    env_args: dict[str, Any],
    num_tasks: int,
    sampling: Any,
    concurrency: int,
    out: Path,
) -> None:
    """``verigym.select.workflow.arun_selection`` under a progress bar drawn from its events; its
    errors as one red line; then the summary table."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from verigym.select.workflow import SelectEvent, arun_selection

    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )
    bars: dict[str, Any] = {}

    def on_event(event: SelectEvent) -> None:
        if event.kind == "record":
            progress.update(bars["sampling"], advance=1)
        elif event.kind == "select":
            progress.update(
                bars["selecting"],
                description=f"selecting {event.message}",
                completed=event.done,
                total=event.total,
                visible=True,
            )
        elif event.kind == "start":
            bars["sampling"] = progress.add_task(f"sampling {event.samples} per task", total=event.total)
            bars["selecting"] = progress.add_task("selecting", total=None, visible=False)
            progress.start()  # stopped by end_bar()
        elif event.kind == "env_args":
            console.print(f"[dim]{escape(event.message)}[/]")
        else:  # an in-process model
            console.print(f"[yellow]{event.message}[/]")

    def end_bar() -> None:  # a never-started bar prints nothing (rich would print a blank line)
        if "sampling" in bars:
            progress.stop()

    async def main() -> Any:
        return await arun_selection(
            env,
            model,
            cfg,
            judge=judge,
            grader=bon_grader,
            env_args=env_args,
            num_tasks=num_tasks,
            sampling=sampling,
            concurrency=concurrency,
            out=out,
            on_event=on_event,
        )

    try:
        result = asyncio.run(main())
    except ValueError as exc:  # SelectSetupError is one
        end_bar()
        fail(str(exc))
    except KeyboardInterrupt:
        end_bar()
        console.print(f"[yellow]interrupted:[/] samples so far are in {out / 'results.jsonl'}")
        raise typer.Exit(130) from None
    end_bar()
    print_table(result.summary)
    s = result.summary
    if s.get("sample_errors"):
        first = s.get("first_error") or "no reason recorded"
        console.print(
            f"{s['sample_errors']} of {s.get('samples_total', '?')} samples errored (first: {first})",
            style="yellow",
            markup=False,
            soft_wrap=True,
        )
    console.print(f"wrote {result.out / 'summary.json'} and {result.out / 'report.html'}")


def register(app: typer.Typer) -> None:
    """Add ``verigym select`` to ``app``."""
    app.command("select")(select_command)
