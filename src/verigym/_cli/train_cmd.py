"""``verigym train CONFIG.toml`` (SFT warm-up when configured, then RL) and ``verigym sft CONFIG.toml``."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import typer

from verigym._cli._agentic_opts import AGENT_CMD_HELP, AGENT_HELP
from verigym._cli.common import Dtype, Threads, ToolFormat, console, fail, parse_kv, set_threads
from verigym._library_output import to_run_dir
from verigym.train.presets import preset_help  # data only: no torch at CLI start

__all__ = [
    "TrainProgress",
    "disk_line",
    "errored_line",
    "load_train_config",
    "register",
    "sft",
    "summary_table",
    "train",
    "train_errors",
]


def load_train_config(
    config: Path | None,
    overrides: list[str] | None,
    preset: str | None,
    steps: int | None,
    out: Path | None,
    *,
    dtype: str | None = None,
    tool_format: str | None = None,
) -> Any:
    """The validated config, or one red line and exit 2. ``dtype``/``tool_format``: ``--dtype`` and
    ``--tool-format``, the ``[model]`` table's keys (as every command that opens a model spells them)."""
    from verigym.policies.spec import DTYPE_CHOICES, check_tool_format
    from verigym.train.config import ConfigError, load_config

    kv = parse_kv(overrides, "--set")
    if dtype is not None:
        if dtype not in DTYPE_CHOICES:
            fail(f"--dtype {dtype}: expected one of {', '.join(DTYPE_CHOICES)}")
        kv["model.dtype"] = dtype
    if tool_format is not None:
        try:
            kv["model.tool_format"] = check_tool_format(tool_format)
        except ValueError as exc:
            fail(f"--tool-format: {exc}")
    if preset is not None:
        kv["rl.preset"] = preset
    if steps is not None:
        kv["rl.steps"] = steps
    if out is not None:
        kv["out_dir"] = str(out)
    try:
        return load_config(config, kv)
    except ConfigError as exc:
        fail(str(exc))


class TrainProgress:
    """A rich progress bar fed by the trainer's ``progress(event, info)`` callback."""

    def __init__(
        self, total_rl: int, total_sft: int = 0, *, sft: bool | None = None, rl: bool = True
    ) -> None:
        """``total_sft`` 0 with ``sft`` True: an SFT bar of unknown length (epochs over unknown data)."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.fields[info]}"), console=console, transient=False,
        )  # fmt: skip
        show_sft = bool(total_sft) if sft is None else sft
        self.sft = self.bar.add_task("SFT", total=total_sft or None, info="", visible=show_sft)
        self.rl = self.bar.add_task("RL", total=total_rl, info="", start=False, visible=rl)

    def __enter__(self) -> TrainProgress:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.bar.__exit__(*exc)

    def __call__(self, event: str, info: dict[str, Any]) -> None:
        if event == "teacher":  # rl.distill.teacher_recipe: the teacher's own run comes first
            self.bar.console.print(
                f"rl.distill: no teacher at {info['teacher']} yet; training it first with "
                f"{info['recipe']} (into {info['out_dir']}), then the student",
                markup=False,
            )
        elif event == "sft_step":
            text = f"loss {info['loss']:.3f}"
            if "eval/pass_at_1" in info:
                text += f"  held-out pass@1 {_rate(info['eval/pass_at_1'])}"
            self.bar.update(self.sft, completed=info["step"], info=text, visible=True)
        elif event == "step":
            if not self.bar.tasks[self.rl].started:
                self.bar.start_task(self.rl)
                sft = self.bar.tasks[self.sft]
                if sft.visible and sft.completed:  # SFT stopped early (target reached): show it done
                    self.bar.update(self.sft, total=sft.completed)
            text = f"reward {info.get('reward', float('nan')):.2f}  pass {info.get('pass_rate', float('nan')):.2f}"
            if "entropy" in info:
                text += f"  H {info['entropy']:.2f}"
            if "eval/pass_at_1" in info:
                text += f"  held-out {_rate(info['eval/pass_at_1'])}"
            self.bar.update(self.rl, completed=info["step"] + 1, info=text)
        elif event == "skipped":  # a non-finite loss, gradient or advantage: the update did not happen
            self.bar.console.print(
                f"step {info['step']}: update skipped ({info['reason']})", markup=False, style="yellow"
            )


def _rate(value: float | None) -> str:
    return "nothing scored" if value is None else f"{value:.2f}"


def summary_table(title: str, summary: dict[str, Any]) -> None:
    """The run's summary; a pass@1 that nothing measured reads ``nothing scored``, never 0."""
    from rich.table import Table

    table = Table(title=title)
    table.add_column("")
    table.add_column("value", justify="right")
    for k, v in summary.items():
        if k in ("non_finite", "warning", "train_first_error", "eval/first_error"):
            continue  # printed as lines of their own
        if v is None and "pass_at_1" in k:
            table.add_row(k, "nothing scored")
        else:
            table.add_row(k, f"{v:.3f}" if isinstance(v, float) else str(v))
    console.print(table)


def errored_line(errored: int, total: int, first: str | None) -> str | None:
    """``N of M samples errored (first: ...)`` when any did, else None."""
    if not errored:
        return None
    return f"{errored} of {total} samples errored (first: {first or 'no reason recorded'})"


def train_errors(summary: dict[str, Any]) -> str | None:
    """The errored-samples line of a train run's summary: training samples, then held-out ones."""
    parts = []
    if line := errored_line(
        int(summary.get("train_samples_errored", 0)),
        int(summary.get("train_samples", 0)),
        summary.get("train_first_error"),
    ):
        parts.append(f"training: {line}")
    if line := errored_line(
        int(summary.get("eval/errors", 0)),
        int(summary.get("eval/samples", 0)),
        summary.get("eval/first_error"),
    ):
        parts.append(f"held-out eval: {line}")
    return "; ".join(parts) or None


def _size(mb: float) -> str:
    return f"{mb / 1000:.2f} GB" if mb >= 1000 else f"{mb:.0f} MB"


def disk_line(run_dir: Path, summary: dict[str, Any]) -> str:
    """What the run left on disk, and which part only ``--resume`` needs."""
    from verigym.train.checkpoint import latest_checkpoint

    latest = latest_checkpoint(run_dir)
    line = f"On disk: {_size(summary['run_dir_mb'])} in {run_dir}; the final model {summary['model_dir']} "
    line += _size(summary["model_mb"])
    if "model_files_shared_with" in summary:
        line += f" (the same files as {summary['model_files_shared_with']}, hard-linked)"
    if latest is not None and summary.get("resume_state_mb"):
        line += (
            f"; optimizer and resume state {_size(summary['resume_state_mb'])} in {latest / 'trainer.pt'},"
            " needed only to --resume (delete it once the run is done)"
        )
    if summary.get("ref_model_mb"):
        line += f"; KL reference model {_size(summary['ref_model_mb'])}"
    return line + "."


def _apply_scale_flags(
    cfg: Any, async_ahead: int | None, remote: list[str] | None, ray: bool, ray_address: str | None
) -> bool:
    """Fold --async/--remote/--ray into ``cfg.scale``; whether the scaled runner is needed."""
    from pydantic import ValidationError

    try:
        if async_ahead is not None:
            cfg.scale.max_staleness = async_ahead
        if remote:
            cfg.scale.servers = list(remote)
        if ray:
            cfg.scale.ray = True
            cfg.scale.ray_address = ray_address
    except ValidationError as exc:
        fail(f"--async/--remote/--ray: {exc.errors()[0]['msg']}")
    if cfg.scale.ray:
        import importlib.util

        if importlib.util.find_spec("ray") is None:
            fail("--ray needs Ray, which is not installed: pip install 'verigym[ray]'")
    sc = cfg.scale
    return bool(
        sc.max_staleness is not None or sc.servers or sc.ray or int(os.environ.get("WORLD_SIZE", "1")) > 1
    )


def train(
    config: Path = typer.Argument(None, help="TOML config (model, envs, sampling, sft, rl, eval, logging)."),
    resume: Path = typer.Option(
        None, "--resume", help="Continue the run in this directory from its newest checkpoint."
    ),
    overrides: list[str] = typer.Option(
        None, "--set", help="Override a config key, e.g. --set rl.lr=1e-4 (repeatable)."
    ),
    preset: str = typer.Option(
        None,
        "--preset",
        help=preset_help(),  # made from train.presets.PRESETS
    ),
    steps: int = typer.Option(None, "--steps", help="Number of RL steps (rl.steps)."),
    out: Path = typer.Option(None, "--out", help="Run directory (out_dir)."),
    threads: Threads = None,
    async_ahead: int = typer.Option(
        None, "--async", help="Async off-policy RL: generate up to N steps ahead (scale.max_staleness)."
    ),
    remote: list[str] = typer.Option(
        None,
        "--remote",
        help="Sample from this OpenAI-compatible server URL (repeatable; scale.servers). A server "
        "started with an API key gets it from the environment variable VERIGYM_API_KEY.",
    ),
    ray: bool = typer.Option(False, "--ray", help="Run rollouts and graders on Ray (scale.ray)."),
    ray_address: str = typer.Option(
        None, "--ray-address", help="Ray cluster to join, e.g. auto or ray://head:10001 (implies --ray)."
    ),
    agent: str = typer.Option(None, "--agent", help=AGENT_HELP + " Applies to every env of the config."),
    agent_cmd: str = typer.Option(
        None, "--agent-cmd", help=AGENT_CMD_HELP + " Applies to every env of the config."
    ),
    dtype: Dtype = None,
    tool_format: ToolFormat = None,
) -> None:
    """Train with RL (GRPO family), after a light SFT warm-up when the sft table names data or demos.

    Scale-out (docs/scaling.md): --async N, --remote URL, --ray, and torchrun for several processes.
    """
    from verigym._model_files import ModelFileError
    from verigym.envs.registry import EnvError
    from verigym.train.checkpoint import TrainingHalted, disk_full_line, is_disk_full
    from verigym.train.config import ConfigError
    from verigym.train.pipeline import run_train
    from verigym.train.sft import SFTDataError

    if config is None and resume is None:
        fail("give a CONFIG.toml, or --resume RUN_DIR")
    set_threads(threads)
    if resume is not None and (dtype is not None or tool_format is not None):
        fail("--dtype/--tool-format: a resumed run keeps the model settings it was started with")
    if resume is not None:
        from verigym.train.rl import run_config_path

        run_cfg = run_config_path(resume)
        if run_cfg is None:
            fail(f"--resume {resume}: not a verigym train run directory (no train_config.json)")
        from pydantic import ValidationError

        from verigym.train.config import TrainConfig

        try:
            cfg = TrainConfig.model_validate_json(run_cfg.read_bytes())
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ())) or "config"
            fail(f"--resume {resume}: {run_cfg.name} is not a valid train config ({where}: {first['msg']})")
    else:
        cfg = load_train_config(config, overrides, preset, steps, out, dtype=dtype, tool_format=tool_format)
    if agent is not None or agent_cmd is not None:
        if resume is not None:
            fail("--agent/--agent-cmd: a resumed run keeps the harness it was started with")
        given = {"agent": agent, "agent_cmd": agent_cmd}
        cfg = cfg.model_copy(update={"envs": [e.model_copy(update=given) for e in cfg.envs]})
    to_run_dir(resume if resume is not None else cfg.out_dir)
    scaled = _apply_scale_flags(cfg, async_ahead, remote, ray or bool(ray_address), ray_address)
    leader = os.environ.get("RANK", "0") == "0"  # under torchrun only rank 0 shows progress
    try:
        has_sft = bool(cfg.sft.data or cfg.sft.demos)
        with (
            TrainProgress(cfg.rl.steps, cfg.sft.max_steps, sft=has_sft)
            if leader
            else contextlib.nullcontext() as bar
        ):
            if scaled:
                from verigym.scale.launch import run_scaled_train

                summary = run_scaled_train(cfg, resume=resume, progress=bar)
            else:
                summary = run_train(cfg, resume=resume, progress=bar)
    except (EnvError, SFTDataError, ConfigError, FileNotFoundError, ModelFileError) as exc:
        fail(str(exc))
    except TrainingHalted as exc:  # NaN weights never saved, skipped steps, no update at all
        fail(str(exc), exc.exit_code)  # and a full disk during a checkpoint (DiskFull)
    except (OSError, RuntimeError) as exc:  # Ray missing, weight pushes that kept failing
        run_dir = Path(cfg.out_dir if resume is None else resume)
        if is_disk_full(exc, run_dir):  # a full disk past the checkpoints (metrics, the final model)
            fail(disk_full_line(run_dir, getattr(exc, "filename", None) or "a run file"))
        if type(exc).__name__ not in ("RayMissingError", "WeightPushError"):
            raise
        fail(str(exc))
    if leader:
        run_dir = Path(cfg.out_dir if resume is None else resume)
        summary_table(f"verigym train → {run_dir}", summary)
        if "run_dir_mb" in summary:
            console.print(disk_line(run_dir, summary), markup=False)
        if line := train_errors(summary):
            console.print(line, markup=False, style="yellow", soft_wrap=True)
        if summary.get("warning"):
            console.print(f"warning: {summary['warning']}", markup=False, style="yellow", soft_wrap=True)


def sft(
    config: Path = typer.Argument(
        ..., help="TOML config; its sft table names data (JSONL) or demos (oracle demonstrations)."
    ),
    overrides: list[str] = typer.Option(
        None, "--set", help="Override a config key, e.g. --set sft.lr=1e-3 (repeatable)."
    ),
    out: Path = typer.Option(None, "--out", help="Run directory (out_dir); the model is saved to OUT/sft."),
    threads: Threads = None,
    dtype: Dtype = None,
    tool_format: ToolFormat = None,
) -> None:
    """Supervised fine-tuning on verified trajectories (loss on assistant tokens only)."""
    from verigym._model_files import ModelFileError
    from verigym.envs.registry import EnvError
    from verigym.train.checkpoint import TrainingHalted
    from verigym.train.config import ConfigError
    from verigym.train.pipeline import run_sft
    from verigym.train.sft import SFTDataError

    set_threads(threads)
    cfg = load_train_config(config, overrides, None, None, out, dtype=dtype, tool_format=tool_format)
    to_run_dir(cfg.out_dir)
    try:
        with TrainProgress(0, cfg.sft.max_steps, sft=True, rl=False) as bar:
            summary = run_sft(cfg, progress=bar)
    except (EnvError, SFTDataError, ConfigError, FileNotFoundError, ModelFileError) as exc:
        fail(str(exc))
    except TrainingHalted as exc:  # a NaN model is never saved
        fail(str(exc), exc.exit_code)
    summary_table(f"verigym sft → {cfg.out_dir}", summary)
    if line := train_errors(summary):
        console.print(line, markup=False, style="yellow", soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add ``train`` and ``sft``."""
    app.command()(train)
    app.command()(sft)
