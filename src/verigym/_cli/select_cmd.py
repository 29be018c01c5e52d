"""``verigym select ENV``: compare test-time selection methods (majority, DeepConf offline and
online, GenSelect, best-of-N) by accuracy against samples and against tokens.

Samples once at the largest N through the runner, sub-samples for smaller N, and writes
``results.jsonl``, ``summary.json`` and ``report.html`` (accuracy-vs-tokens plot) to ``--out``.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import typer
from rich.markup import escape

from verigym._cli._select_show import online_mode, print_table
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
    from verigym.envs.base import Environment
    from verigym.eval.trained import TrainedArgs
    from verigym.policies.base import Policy
    from verigym.select import TraceScore

__all__ = ["register"]


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


def _load_env(name: str, kwargs: dict[str, Any]) -> Environment:
    from verigym.envs.base import Environment
    from verigym.envs.registry import load_env

    try:
        env = load_env(name, **kwargs)
    except Exception as exc:  # unknown name or a bad --env-arg: the registry's message is one line
        fail(f"environment {name!r}: {exc}")
    if not isinstance(env, Environment):
        fail(f"environment {name!r} is a {type(env).__name__}, not a verigym Environment")
    return env


def _trained(env: str, env_args: dict[str, Any], model: str | None) -> TrainedArgs | None:
    """``env_args`` completed with what the in-process checkpoint ``model`` was trained with on ``env``
    (``verigym.eval.trained``); None when it has no training record for ``env``."""
    from verigym.eval.trained import trained_args
    from verigym.policies.default import find_record
    from verigym.policies.trained import RecordError

    try:
        return trained_args(env, env_args, find_record(model))
    except RecordError as exc:
        fail(f"--model {model}: {exc}")


def _policy(
    model: str | None,
    base_url: list[str] | None,
    api_key_env: str | None,
    concurrency: int,
    flag: str,
    *,
    dtype: str | None = None,
    tool_format: str | None = None,
) -> tuple[Policy, str, bool]:
    """The policy (through the one opener, ``policies.spec.open_model``), a line describing it, and
    whether it is remote. ``flag``: the prefix of the flags it came from (``--``, ``--judge-``)."""
    from verigym.policies.base import ModelSpecError, PolicyError
    from verigym.policies.spec import MissingApiKey, open_model

    values: dict[str, Any] = {"model": model, "base_url": base_url or [], "api_key_env": api_key_env}
    values |= {"concurrency": concurrency, "dtype": dtype or "auto", "tool_format": tool_format}
    spec = model_spec(values)
    try:
        opened = open_model(spec)
    except MissingApiKey as exc:
        fail(
            exc.worded("--api-key-env")
            if exc.implicit
            else f"{flag}: the environment variable {exc.variable} is not set"
        )
    except ModelSpecError as exc:
        if exc.field != "model":
            fail(exc.worded("--"))
        fail(f"{flag}model {model}: cannot load the local model ({exc})")
    except (OSError, ValueError, PolicyError) as exc:
        fail(f"{flag}model {model}: cannot load the local model ({exc})")
    return opened.policy, opened.description, opened.remote


async def _check(policy: Any, flag: str) -> None:
    from verigym.policies.base import PolicyError

    try:
        models = await policy.check()
    except PolicyError as exc:
        fail(f"{flag}base-url: {exc}")
    if not policy.model:
        if not models:
            fail(f"{flag}model is required: the server lists no models")
        policy.model = models[0]


def _grader(spec: str) -> Any:
    import importlib

    from verigym.rubric import Grader

    module, _, attr = spec.rpartition(":")
    if not module or not attr:
        fail(f"--bon-grader {spec!r}: expected module:attr")
    try:
        target = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        fail(f"--bon-grader {spec!r}: cannot import it ({type(exc).__name__}: {exc})")
    if isinstance(target, Grader):
        return target
    if callable(target):
        return Grader(target, name=attr)
    fail(f"--bon-grader {spec!r} is a {type(target).__name__}, not a Grader or a function")


def register(app: typer.Typer) -> None:
    """Add ``verigym select`` to ``app``."""

    @app.command("select")
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
        out: Path | None = typer.Option(
            None, "--out", help="Output folder (default: runs/select-<env>-<time>)."
        ),
        threads: Threads = None,
        dtype: Dtype = None,
        tool_format: ToolFormat = None,
    ) -> None:
        """Compare selection methods: accuracy vs samples and vs tokens; summary.json and report.html."""
        set_threads(threads)
        from verigym.select.methods import SelectConfig, needs_judge
        from verigym.types import Sampling

        methods = _methods(method)
        if score not in ("lowest", "bottom10", "tail", "mean"):
            fail(f"--score {score!r}: expected lowest, bottom10, tail or mean")
        if eta <= 0:
            fail("--eta must be above 0 (the fraction of traces kept)")
        n_list = _ns(samples, ns)
        env_args = parse_kv(env_arg, "--env-arg")
        trained = None if base_url else _trained(env, env_args, model)
        if trained is not None:
            env_args = trained.args
            console.print(f"[dim]{escape(trained.message)}[/]")
        environment = _load_env(env, env_args)
        try:
            tasks = environment.tasks(num_tasks, seed=seed)
        except Exception as exc:
            fail(f"environment {env!r}: cannot load tasks: {exc}")
        if not tasks:
            fail(f"environment {env!r} has no tasks")
        policy, description, remote = _policy(
            model, base_url, api_key_env, concurrency, "--", dtype=dtype, tool_format=tool_format
        )
        sources = trained.sources if trained is not None else {k: "user" for k in env_args}
        judge = None
        judge_remote = False
        grader = _grader(bon_grader) if bon_grader else None
        if needs_judge(methods) and not (methods == ["best-of-n"] and grader):
            if judge_model is None and judge_base_url is None:
                judge, judge_remote = policy, False
            else:
                judge, _, judge_remote = _policy(
                    judge_model, judge_base_url or base_url, api_key_env, concurrency, "--judge-"
                )
        if not remote:
            console.print(f"[yellow]{description}[/]")
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
            grader=grader,
        )
        folder = out or Path(
            f"runs/select-{re.sub(r'[^A-Za-z0-9_.-]+', '_', env)[:40]}-{time.strftime('%Y%m%d-%H%M%S')}"
        )
        if (folder / "results.jsonl").exists() and (folder / "results.jsonl").stat().st_size:
            fail(f"{folder}/results.jsonl already holds results; pick another --out")
        _run(
            environment,
            env,
            policy,
            judge,
            remote,
            judge_remote,
            tasks,
            cfg,
            folder,
            concurrency,
            Sampling(temperature=temperature, max_tokens=max_tokens, seed=seed),
            {"env_args": env_args, "env_args_from": sources},
        )


def _run(
    environment: Environment,
    env_name: str,
    policy: Policy,
    judge: Policy | None,
    remote: bool,
    judge_remote: bool,
    tasks: list[Any],
    cfg: Any,
    folder: Path,
    concurrency: int,
    sampling: Any,
    env_meta: dict[str, Any],
) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from verigym.select.experiment import run_experiment
    from verigym.types import Record

    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )
    samples = max(cfg.ns)
    bar = progress.add_task(f"sampling {samples} per task", total=len(tasks) * samples)
    sel_bar = progress.add_task("selecting", total=None, visible=False)

    def advance(_: Record) -> None:
        progress.update(bar, advance=1)

    def selecting(label: str, done: int, total: int) -> None:
        progress.update(sel_bar, description=f"selecting {label}", completed=done, total=total, visible=True)

    async def main() -> Any:
        try:
            if remote:
                await _check(policy, "--")
            if judge is not None and judge is not policy and judge_remote:
                await _check(judge, "--judge-")
            return await run_experiment(
                environment,
                policy,
                tasks,
                cfg,
                sampling=sampling,
                concurrency=concurrency,
                judge=judge,
                out=folder,
                env_name=env_name,
                on_record=advance,
                on_select=selecting,
                extra_meta={"deepconf_online_mode": online_mode(policy, remote), **env_meta},
            )
        finally:
            for p in {id(policy): policy, id(judge): judge}.values():
                close = getattr(p, "aclose", None)
                if close is not None:
                    await close()

    try:
        with progress:
            result = asyncio.run(main())
    except ValueError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted:[/] samples so far are in {folder / 'results.jsonl'}")
        raise typer.Exit(130) from None
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
    console.print(f"wrote {folder / 'summary.json'} and {folder / 'report.html'}")
