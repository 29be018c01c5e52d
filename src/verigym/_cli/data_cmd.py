"""Data and benchmark-quality commands: ``profile``, ``synth``, ``select-tasks``, ``quality``.

``profile`` and ``synth`` are evals with a purpose: the library's ``verigym.data.profile`` and
``synthesize`` run an eval (resume, report) into ``--out`` and then derive a pass-rate profile or an
SFT set from its verified records, so a crash or Ctrl-C loses nothing and ``--resume`` continues; the
commands resolve the config and draw the progress as ``verigym eval`` does (``_eval_run``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from verigym._cli._agentic_opts import AGENT_CMD_HELP, AGENT_HELP
from verigym._cli._eval_run import resolve_config, run_with_progress
from verigym._cli.common import (
    Dtype,
    MaxTokens,
    Temperature,
    Threads,
    ToolFormat,
    console,
    fail,
    parse_kv,
    set_threads,
)
from verigym._files import write_json

if TYPE_CHECKING:
    from verigym.data.rejection import Keep
    from verigym.eval.config import EvalConfig

__all__ = ["profile_command", "quality_command", "register", "select_tasks_command", "synth_command"]

# The options ``profile`` and ``synth`` share, word for word.
_Seed = Annotated[int, typer.Option("--seed", help="Seed of the tasks and samples.")]
_EnvArg = Annotated[list[str] | None, typer.Option("--env-arg", help="key=value for the env; repeatable.")]


def _records(run_dir: Path) -> list[dict[str, Any]]:
    from verigym.eval.store import StoreError, load_records
    from verigym.record import RunFormatError, read_run

    path = run_dir / "results.jsonl" if run_dir.is_dir() else run_dir
    if not path.exists():
        fail(f"{run_dir}: no results.jsonl (expected an eval run folder)")
    try:
        if run_dir.is_dir():
            read_run(run_dir)  # a run in a newer run-record format: one line, not a guess
    except RunFormatError as exc:
        fail(str(exc))
    try:
        return [r.model_dump(mode="json") for r in load_records(path)]
    except StoreError as exc:
        fail(str(exc))


def _eval_config(env: str, env_arg: list[str] | None, out: Path, resume: bool, **flags: Any) -> EvalConfig:
    """The ``EvalConfig`` of ``verigym eval`` with these settings into ``out`` (resumable)."""
    flags = {**flags, "env": env, "out": str(out), "env_args": parse_kv(env_arg, "--env-arg")}
    config, _ = resolve_config(flags, None, resume)
    return config


def profile_command(
    env: str = typer.Argument(..., help="Environment name (see `verigym envs`)."),
    model: str | None = typer.Option(None, "--model", "-m", help="Model at --base-url, or a local path."),
    base_url: list[str] | None = typer.Option(None, "--base-url", help="OpenAI-compatible endpoint."),
    num_tasks: int = typer.Option(100, "-n", "--num-tasks", help="Tasks to profile."),
    samples: int = typer.Option(8, "-k", "--samples-per-task", help="Samples per task (the estimate's n)."),
    split: str = typer.Option("train", "--split", help="Which split to profile (usually train)."),
    temperature: Temperature = 1.0,
    max_tokens: MaxTokens = None,
    seed: _Seed = 0,
    band: tuple[float, float] = typer.Option((0.0, 1.0), "--band", help="Pass-rate band LOW HIGH (open)."),
    env_arg: _EnvArg = None,
    out: Path = typer.Option(..., "--out", help="Output folder: results, profile.jsonl, band.json."),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted profile in --out."),
    threads: Threads = None,
    dtype: Dtype = None,
    tool_format: ToolFormat = None,
) -> None:
    """Estimate each task's pass rate with k samples; write profile.jsonl and the band's task ids."""
    from verigym.data.workflow import ProfileResult, aprofile

    set_threads(threads)
    config = _eval_config(
        env,
        env_arg,
        out,
        resume,
        model=model,
        base_url=base_url or None,
        num_tasks=num_tasks,
        split=split,
        samples_per_task=samples,
        temperature=temperature,
        max_tokens=max_tokens,
        seed=seed,
        dtype=dtype,
        tool_format=tool_format,
    )
    done: ProfileResult = run_with_progress(
        config,
        out,
        resume,
        lambda on_event: aprofile(
            config.env, None, config, band=band, out=out, resume=resume, on_event=on_event
        ),
        eval_of=lambda result: result.run,
    )
    assert done.profile is not None  # every sample errored: run_with_progress exited 1
    rates = [s.pass_rate for s in done.profile.tasks.values()]
    console.print(
        f"profiled {len(rates)} tasks: {sum(r == 0 for r in rates)} never solved, "
        f"{sum(r == 1 for r in rates)} always solved, {len(done.in_band)} in band {band} -> {done.profile_file}"
    )


def synth_command(
    env: str = typer.Argument(..., help="Environment name (see `verigym envs`)."),
    teacher: str | None = typer.Option(
        None,
        "--teacher",
        help="Teacher model at --base-url, a local path or catalogue name, or 'oracle' (the environment's "
        "own oracle policy).",
    ),
    base_url: list[str] | None = typer.Option(
        None, "--base-url", help="Teacher's OpenAI-compatible endpoint."
    ),
    num_tasks: int = typer.Option(200, "-n", "--num-tasks", help="Tasks to sample demonstrations for."),
    samples: int = typer.Option(4, "-k", "--samples-per-task", help="Samples per task."),
    split: str = typer.Option("train", "--split", help="Which split (never the test split you report)."),
    temperature: float = typer.Option(1.0, "--temperature", help="Teacher sampling temperature."),
    max_tokens: MaxTokens = None,
    seed: _Seed = 0,
    keep: str = typer.Option("all", "--keep", help="all | shortest | diverse (n-gram dedupe)."),
    per_task: int | None = typer.Option(None, "--per-task", help="At most this many kept per task."),
    threshold: float = typer.Option(1.0, "--threshold", help="Reward a sample needs to count as verified."),
    env_arg: _EnvArg = None,
    agent: str | None = typer.Option(None, "--agent", help=AGENT_HELP),
    agent_cmd: str | None = typer.Option(None, "--agent-cmd", help=AGENT_CMD_HELP),
    out: Path = typer.Option(..., "--out", help="Output folder: results, sft.jsonl, synth.json."),
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted run in --out."),
    threads: Threads = None,
    dtype: Dtype = None,
    tool_format: ToolFormat = None,
) -> None:
    """Rejection sampling: keep the teacher's verified trajectories as SFT data (sft.jsonl)."""
    from verigym.data.workflow import SynthResult, asynthesize

    if keep not in ("all", "shortest", "diverse"):
        fail(f"--keep {keep!r}: expected all, shortest or diverse")
    set_threads(threads)
    oracle = teacher == "oracle" and not base_url
    config = _eval_config(
        env,
        env_arg,
        out,
        resume,
        model=None if oracle else teacher,
        policy="oracle" if oracle else None,
        base_url=base_url or None,
        num_tasks=num_tasks,
        split=split,
        samples_per_task=samples,
        temperature=temperature,
        max_tokens=max_tokens,
        seed=seed,
        agent=agent,
        agent_cmd=agent_cmd,
        dtype=dtype,
        tool_format=tool_format,
    )
    done: SynthResult = run_with_progress(
        config,
        out,
        resume,
        lambda on_event: asynthesize(
            config.env,
            None,
            config,
            keep=cast("Keep", keep),
            per_task=per_task,
            threshold=threshold,
            out=out,
            resume=resume,
            on_event=on_event,
        ),
        eval_of=lambda result: result.run,
    )
    assert done.stats is not None  # every sample errored: run_with_progress exited 1
    report = done.stats.to_dict()
    console.print(
        f"kept {len(done.kept)} verified samples from {report['samples']} ({report['yield']:.1%} yield, "
        f"{report['errors']} errored, {report['completion_tokens']} completion tokens) -> {done.sft_file}"
    )


def select_tasks_command(
    run_dir: Path = typer.Argument(
        ..., help="A `verigym train` run folder (variance) or a `verigym profile` folder (band)."
    ),
    by: str = typer.Option("variance", "--by", help="variance (1-shot RLVR) | band (pass-rate band)."),
    top: int = typer.Option(10, "--top", help="How many tasks to print and write."),
    band: tuple[float, float] = typer.Option((0.0, 1.0), "--band", help="With --by band: LOW HIGH."),
) -> None:
    """Rank training tasks by the variance of their accuracy history, or pick a pass-rate band."""
    from verigym.data.difficulty import Profile, rank_by_variance

    ranked: list[dict[str, Any]]
    if by == "variance":
        path = run_dir / "metrics.jsonl"
        if not path.exists():
            fail(f"{run_dir}: no metrics.jsonl (expected a `verigym train` run folder)")
        history: dict[str, list[float]] = {}
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            try:
                row = json.loads(line)
                rates = row.get("task_pass_rates", {}) if row.get("phase") == "rl" else {}
                for task, rate in rates.items():
                    history.setdefault(str(task), []).append(float(rate))
            except (json.JSONDecodeError, AttributeError, TypeError, ValueError):
                fail(f"{path}:{lineno}: expected a JSON object with task_pass_rates {{task: rate}}")
        if not history:
            fail(f"{path}: no RL step recorded task_pass_rates")
        ranked = [{"task_id": t, "variance": v} for t, v in rank_by_variance(history, top=top)]
    elif by == "band":
        path = run_dir / "profile.jsonl"
        if not path.exists():
            fail(f"{run_dir}: no profile.jsonl (run `verigym profile` first)")
        try:
            prof = Profile.load(path)
        except ValueError as exc:
            fail(str(exc))
        ranked = [{"task_id": t, "pass_rate": prof.pass_rate(t)} for t in prof.in_band(*band)][:top]
    else:
        fail(f"--by {by!r}: expected variance or band")
    write_json(run_dir / f"selected_by_{by}.json", ranked, indent=1)
    for row in ranked:
        console.print(
            "  ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items())
        )


def quality_command(
    runs: list[str] = typer.Argument(..., help="Eval run folders, optionally NAME=DIR, one per model."),
    retest: tuple[str, str] | None = typer.Option(None, "--retest", help="Two NAMEs: runs of one model."),
    threshold: float = typer.Option(1.0, "--threshold", help="Reward that counts as a pass."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap."),
    out: Path = typer.Option(Path("runs/quality"), "--out", help="Folder for quality.json and report.html."),
) -> None:
    """Benchmark quality over eval runs of several models: hardness, separability, diversity, noise."""
    from verigym.eval.quality import quality_report
    from verigym.eval.quality_report import write_quality_report

    named: dict[str, list[dict[str, Any]]] = {}
    for item in runs:
        name, sep, folder = item.partition("=")
        name, folder = (name, folder) if sep else (Path(item).name, item)
        if name in named:
            fail(f"two runs are named {name!r}: use NAME=DIR")
        named[name] = _records(Path(folder))
    if retest and any(r not in named for r in retest):
        fail(f"--retest {retest}: names must be among {sorted(named)}")
    report = quality_report(named, threshold=threshold, retest=retest, seed=seed)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "quality.json", report.to_dict(), indent=1)
    write_quality_report(report, out / "report.html")
    h, s = report.hardness, report.separability
    console.print(
        f"tasks {h['n_tasks']}  mean pass {h['mean_pass_rate']:.3f}  "
        f"unsolved by all {h['share_unsolved_by_all']:.1%}  solved by all {h['share_solved_by_all']:.1%}"
    )
    console.print(
        f"pairs separated {s['share_separated']:.1%}  rank stability tau {s['rank_stability_tau']:.3f}"
    )
    for model, mean in h["per_model_mean"].items():
        console.print(f"  {model}: {mean:.3f}")
    console.print(f"-> {out / 'quality.json'}, {out / 'report.html'}")


def register(app: typer.Typer) -> None:
    """Add the data and quality commands to ``app``."""
    app.command("profile")(profile_command)
    app.command("synth")(synth_command)
    app.command("select-tasks")(select_tasks_command)
    app.command("quality")(quality_command)
