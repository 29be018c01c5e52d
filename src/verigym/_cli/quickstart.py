"""``verigym quickstart``: build a tiny model, SFT it lightly, train it with GRPO (DAPO preset), offline."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from verigym._cli.common import console, fail
from verigym._library_output import to_run_dir

__all__ = ["quickstart", "register"]


def quickstart(
    out: Path = typer.Option(
        Path("runs/quickstart"), "--out", help="Run directory; `verigym eval` finds OUT/checkpoint."
    ),
    seed: int = typer.Option(0, "--seed", help="Seed of the model, the tasks and the sampling."),
    steps: int = typer.Option(
        None,
        "--steps",
        # a test keeps these equal to the recipes' rl.steps (importing them here would load torch)
        help="RL steps (default 100; 60 with --env calc; 40 with --model; 12 with --env calc --model).",
    ),
    threads: int | None = typer.Option(
        None,
        "--threads",
        help="torch CPU threads (default 1, fastest for the tiny model; torch's choice with --model).",
    ),
    env: str = typer.Option(
        "arithmetic",
        "--env",
        help="arithmetic (2-digit addition) or calc (an agent that learns to call a calculator tool).",
    ),
    model: str | None = typer.Option(
        None,
        "--model",
        help="A real pretrained model (a catalogue name such as smollm2-135m-instruct, or a directory): "
        "light SFT in its own chat template, then GRPO (DAPO), on 2-digit addition/subtraction asked in "
        "words, or with --env calc on calling the calculator in its own tool-call format "
        "(default: the tiny model verigym builds).",
    ),
) -> None:
    """Offline demo: tiny model → light SFT on verified demos → GRPO (DAPO) → held-out pass@1 before/after."""
    import torch
    from rich.table import Table

    from verigym._cli.train_cmd import TrainProgress
    from verigym.recipes.quickstart import quickstart as run
    from verigym.recipes.quickstart import quickstart_config

    if threads is not None or model is None:
        torch.set_num_threads(max(1, threads or 1))
    to_run_dir(out)
    overrides = {} if steps is None else {"rl__steps": steps}
    if steps is not None and steps < 1:
        fail(f"--steps must be at least 1, got {steps}")
    if env not in ("arithmetic", "calc"):
        fail(f"--env must be arithmetic or calc, got {env!r}")
    if model is not None:
        from verigym.policies.catalogue import resolve

        try:
            resolve(model)
        except ValueError as exc:
            fail(str(exc))
    if env == "calc":
        _calc(
            out if out != Path("runs/quickstart") else Path("runs/quickstart_calc"),
            seed,
            overrides,
            model,
        )
        return
    if model is not None:
        from verigym.recipes.quickstart_real import real_quickstart_config

        cfg = real_quickstart_config(out, model=model, seed=seed, **overrides)
        what = f"{model} → light SFT on verified 2-digit arithmetic demos in its chat template"
    else:
        cfg = quickstart_config(out, seed=seed, **overrides)
        what = "tiny model → light SFT on verified arithmetic demos"
    console.print(
        f"[bold]verigym quickstart[/]: {escape(what)} → "
        f"GRPO (DAPO preset, {cfg.rl.steps} steps) → held-out pass@1 — offline, CPU"
    )
    with TrainProgress(
        cfg.rl.steps,
        cfg.sft.max_steps
        or cfg.sft.epochs * ((cfg.sft.demos + cfg.sft.batch_size - 1) // cfg.sft.batch_size),
    ) as bar:
        summary = run(cfg, progress=bar)
    table = Table(
        title=f"held-out pass@1 (arithmetic, {cfg.eval.tasks} test tasks x {cfg.eval.samples} samples, T={cfg.eval.temperature:g})"
    )
    table.add_column("stage")
    table.add_column("pass@1", justify="right")
    for label, key in (
        ("initial (random tiny)" if model is None else f"initial ({model})", "pass_at_1_initial"),
        ("after SFT", "pass_at_1_after_sft"),
        ("after RL", "pass_at_1_after_rl"),
    ):
        value = summary.get(key)
        table.add_row(label, "-" if value is None else f"{value:.3f}")
    console.print(table)
    console.print(
        f"{summary.get('sft_steps')} SFT steps, {summary['steps']} RL steps in {summary['wall_s']:.0f}s. "
        f"Wrote {out}/summary.json, {out}/report.html; model in {summary['model_dir']} "
        f"(`verigym eval arithmetic --model {summary['model_dir']}` evaluates it with the arguments it "
        "was trained with, from its training record)."
    )


def register(app: typer.Typer) -> None:
    """Add ``quickstart``."""
    app.command()(quickstart)


def _calc(out: Path, seed: int, overrides: dict[str, int], model: str | None) -> None:
    """``--env calc``: the tool-use demo; prints pass@1 and the well-formed tool-call rate per stage."""
    from rich.table import Table

    from verigym._cli.train_cmd import TrainProgress
    from verigym.recipes.quickstart_calc import calc_quickstart, calc_quickstart_config
    from verigym.recipes.quickstart_real import real_calc_config

    if model is None:
        cfg = calc_quickstart_config(out, seed=seed, **overrides)
    else:
        cfg = real_calc_config(out, model=model, seed=seed, **overrides)
    console.print(
        f"[bold]verigym quickstart --env calc[/]: {escape(model or 'tiny model')} → light SFT on verified "
        "tool-using trajectories → "
        f"GRPO (DAPO preset, {cfg.rl.steps} steps) → held-out pass@1 and tool-call rate — offline, CPU"
    )
    sft_bound = cfg.sft.max_steps or cfg.sft.epochs * (
        (cfg.sft.demos + cfg.sft.batch_size - 1) // cfg.sft.batch_size
    )
    with TrainProgress(cfg.rl.steps, sft_bound) as bar:
        summary = calc_quickstart(cfg, progress=bar)
    table = Table(
        title=f"held-out calc ({cfg.eval.tasks} test tasks x {cfg.eval.samples} samples, T={cfg.eval.temperature:g})"
    )
    table.add_column("stage")
    table.add_column("pass@1", justify="right")
    table.add_column("well-formed tool call", justify="right")
    for label, stage in (
        ("initial (random tiny)" if model is None else f"initial ({model})", "initial"),
        ("after SFT", "after_sft"),
        ("after RL", "after_rl"),
    ):
        cells = [summary.get(f"{m}_{stage}") for m in ("pass_at_1", "tool_call_ok")]
        table.add_row(label, *("-" if v is None else f"{v:.3f}" for v in cells))
    console.print(table)
    console.print(
        f"{summary.get('sft_steps')} SFT steps, {summary['steps']} RL steps in {summary['wall_s']:.0f}s. "
        f"Wrote {out}/summary.json, {out}/report.html; model in {summary['model_dir']} "
        f"(`verigym eval calc --model {summary['model_dir']}` evaluates it with the arguments it was "
        "trained with, from its training record)."
    )
