"""End-to-end runs from a ``TrainConfig``: light SFT (when ``[sft]`` names data or demos), then RL.

``run_sft`` and ``run_train`` back ``verigym sft`` and ``verigym train``; ``quickstart`` uses the
same pieces. Output layout of ``out_dir``: ``sft/`` (the SFT model), ``checkpoints/`` (resumable RL
checkpoints), ``checkpoint/`` (the final model, loadable with ``from_pretrained`` — or the LoRA
adapter; the last checkpoint's files hard-linked, not a second copy), ``metrics.jsonl``,
``report.html``, ``summary.json`` (with the run's disk cost, ``disk_usage``, and the run header),
``train_config.json``, ``run.json`` (the run header, ``verigym.record``: written when the run starts,
again when it is resumed and when it ends; ``metrics.jsonl`` stays one line a step).
Every model directory written (``sft/``, ``checkpoint/``, each checkpoint's ``model/``) carries its
training record, ``verigym_training.json`` (``train.record``): what ``verigym eval`` reads back.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from verigym._files import write_atomic, write_json
from verigym.envs.base import Environment
from verigym.policies.trained import TrainingRecord, write_record
from verigym.record import RunFormatError, RunHeader, new_header, read_header, with_header, write_header
from verigym.train._model import load_model
from verigym.train.checkpoint import TrainingHalted, check_finite, disk_usage, latest_checkpoint, link_model
from verigym.train.config import ConfigError, TrainConfig, load_config
from verigym.train.monitor import MetricsLog, read_metrics
from verigym.train.report import write_report
from verigym.train.rl import RUN_CONFIG, Progress, RLTrainer, load_envs, run_config_path
from verigym.train.samples import Row
from verigym.train.sft import SFTDataError, load_sft_rows, messages_row, oracle_demos, sft_train

__all__ = [
    "build_sft_rows",
    "final_model",
    "no_update_reason",
    "prepare_teacher",
    "run_sft",
    "run_train",
    "save_final",
    "sft_warmup",
    "train_header",
    "write_summary",
]


def build_sft_rows(cfg: TrainConfig, tokenizer: Any, envs: Sequence[tuple[str, Environment]]) -> list[Row]:
    """The SFT rows the config asks for: ``sft.data`` and/or ``sft.demos`` oracle demonstrations per env."""
    rows: list[Row] = []
    if cfg.sft.data:
        rows += load_sft_rows(cfg.sft.data, tokenizer, tool_format=cfg.model.tool_format)
    if cfg.sft.demos:
        per_env = max(1, cfg.sft.demos // len(envs))
        for name, env in envs:
            demos = asyncio.run(oracle_demos(env, per_env, seed=cfg.seed, env_name=name))
            fmt = cfg.model.tool_format
            rows += [messages_row(tokenizer, d, env.tool_schemas(), tool_format=fmt) for d in demos]
    if not rows:
        raise SFTDataError("[sft] needs data (a JSONL file) or demos (a number of oracle demonstrations)")
    return rows


def save_final(model: Any, tokenizer: Any, path: str | Path, record: TrainingRecord | None = None) -> Path:
    """``save_pretrained`` the model (or its adapter) and the tokenizer into ``path``, with ``record``
    (what the weights were trained with, ``policies.trained``) beside them."""
    from transformers.utils import logging as hf_logging

    check_finite(model, f"the model for {path}")  # a NaN model is never saved
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    hf_logging.disable_progress_bar()  # no "Writing model shards" bars in our own progress display
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    if record is not None:
        write_record(out, record)
    return out


def final_model(trainer: RLTrainer) -> tuple[Path, Path | None]:
    """``out_dir/checkpoint`` and the checkpoint ``model/`` it shares its files with: the last
    checkpoint's hard-linked when it holds the final weights (one copy on disk), else (None) a fresh
    ``save_pretrained``."""
    out = trainer.out_dir / "checkpoint"
    latest = latest_checkpoint(trainer.out_dir)
    if latest is not None and latest.name == f"step_{trainer.step:06d}" and (latest / "model").is_dir():
        return link_model(latest / "model", out), latest / "model"
    return save_final(trainer.model, trainer.tokenizer, out, trainer.training_record()), None


def _sft_phase(
    cfg: TrainConfig,
    model: Any,
    tokenizer: Any,
    trainer: RLTrainer,
    log: MetricsLog,
    progress: Progress | None,
) -> dict[str, Any]:
    def on_step(info: dict[str, Any]) -> None:
        log.log(info)
        if progress is not None:
            progress("sft_step", info)

    return sft_warmup(cfg, model, tokenizer, trainer, on_step=on_step)


def sft_warmup(
    cfg: TrainConfig,
    model: Any,
    tokenizer: Any,
    trainer: RLTrainer,
    *,
    on_step: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """SFT of ``trainer``'s model on the config's rows (``build_sft_rows``) until ``cfg.sft``'s target of
    the trainer's held-out pass@1; ``sft_train``'s summary with ``rows``, the number of rows."""
    rows = build_sft_rows(cfg, tokenizer, trainer.envs)
    result = sft_train(
        model,
        tokenizer,
        rows,
        cfg.sft,
        seed=cfg.seed,
        evaluate=lambda: trainer.evaluate(greedy=cfg.sft.target_greedy)["eval/pass_at_1"],
        on_step=on_step,
    )
    result["rows"] = len(rows)
    return result


def no_update_reason(trainer: RLTrainer, first: int) -> str:
    """Why steps ``first``.. of ``trainer`` never updated the model: every sample errored (with the
    first error), every update was skipped as non-finite, or no group had a signal (all rewards
    equal within each group: the only one of the three that ``run_train`` lets finish, warned)."""
    steps = trainer.history
    n = trainer.step - first
    sampled = sum(int(m.get("samples_total") or 0) for m in steps)
    errored = sum(int(m.get("samples_errored") or 0) for m in steps)
    skips = [m["skip_reason"] for m in steps if "skip_reason" in m]
    head = f"rl: no step of {n} updated the model"
    if skips:
        return f"{head}: every update was skipped ({skips[0]})"
    if sampled and errored >= sampled:
        first_error = trainer.producer.first_error or "no reason recorded"
        return f"{head}: all {sampled} samples errored (first: {first_error})"
    return (
        f"{head}: no group had a trainable signal ({errored} of {sampled} samples errored; the rest "
        "got equal rewards within each group)"
    )


def _train_errors(run: Path) -> dict[str, Any]:
    """The run's training samples (every RL step in ``metrics.jsonl``, so a resumed run counts the
    steps before it too): ``train_samples``, ``train_samples_errored`` and the first error's reason
    (``train_first_error``)."""
    rows = [r for r in read_metrics(run / "metrics.jsonl") if r.get("phase") == "rl"]
    out: dict[str, Any] = {
        "train_samples": int(sum(r.get("samples_total") or 0 for r in rows)),
        "train_samples_errored": int(sum(r.get("samples_errored") or 0 for r in rows)),
    }
    first = next((r["first_error"] for r in rows if r.get("first_error")), None)
    if first is not None:
        out["train_first_error"] = first
    return out


def _stage(evaluation: dict[str, float], stage: str) -> dict[str, float]:
    """``pass_at_1_STAGE`` and each held-out grader mean as ``eval/ENV/grader/NAME_STAGE``."""
    out = {f"pass_at_1_{stage}": evaluation["eval/pass_at_1"]}
    out.update({f"{k}_{stage}": v for k, v in evaluation.items() if "/grader/" in k})
    return out


STAGES = "stages.json"
"""The pre-RL part of a run's summary (initial and after-SFT pass@1, SFT steps), kept for a resumed run."""


def train_header(cfg: TrainConfig, *, resumed: bool = False) -> RunHeader:
    """The run header of a train (or SFT) run starting now."""
    return new_header(
        "train",
        cfg.model_dump(mode="json"),
        seeds={"seed": cfg.seed, "model": cfg.model.seed},
        resumed=resumed,
    )


def write_summary(run: str | Path, summary: dict[str, Any], header: RunHeader | None = None) -> Path:
    """Write ``run/summary.json``: ``summary`` with the run header (``header``, else ``run/run.json``'s)."""
    header = header or read_header(run)
    path = Path(run) / "summary.json"
    write_json(path, summary if header is None else with_header(summary, header))
    return path


def _check_format(run: Path) -> None:
    """A run written in a run-record format this verigym does not read is not resumed (one line)."""
    try:
        read_header(run)
    except RunFormatError as exc:
        raise ConfigError(f"--resume: {exc}") from None


def _saved_config(run: Path) -> TrainConfig:
    path = run_config_path(run)
    if path is None:
        raise FileNotFoundError(f"{run}: no {RUN_CONFIG}; is this a verigym train run directory?")
    cfg = TrainConfig.model_validate_json(path.read_text())
    cfg.out_dir = str(run)
    return cfg


def _read_stages(run: Path) -> dict[str, Any]:
    path = run / STAGES
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    return data if isinstance(data, dict) else {}


def run_sft(cfg: TrainConfig, *, progress: Progress | None = None) -> dict[str, Any]:
    """``verigym sft``: SFT only; the model is saved to ``out_dir/sft``."""
    t0 = time.perf_counter()
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    header = train_header(cfg)
    write_header(out, header)
    model, tokenizer = load_model(cfg.model)
    trainer = RLTrainer(cfg, model=model, tokenizer=tokenizer, out_dir=out)
    log = MetricsLog(out / "metrics.jsonl")
    summary = _sft_phase(cfg, model, tokenizer, trainer, log, progress)
    final = trainer.evaluate()
    summary["pass_at_1"] = final["eval/pass_at_1"]
    summary.update(
        {k: v for k, v in final.items() if k in ("eval/errors", "eval/samples", "eval/first_error")}
    )
    record = trainer.training_record("sft", summary["steps"])
    summary["model_dir"] = str(save_final(model, tokenizer, out / "sft", record))
    ended = header.finished(time.perf_counter() - t0)
    write_header(out, ended)
    write_json(out / "sft_summary.json", with_header(summary, ended))
    return summary


def prepare_teacher(cfg: TrainConfig, *, progress: Progress | None = None) -> None:
    """Run ``rl.distill.teacher_recipe`` (a train config) first when ``rl.distill.teacher`` names no
    model yet: the teacher is that run's output (``train.distill``)."""
    d = cfg.rl.distill
    if d is None or d.teacher_recipe is None or d.teacher is None or d.teacher.served:
        return
    from verigym.policies.default import resolve_model_dir

    where = Path(d.teacher.model or "")
    if where.is_dir() and resolve_model_dir(where) is not None:
        return
    recipe = load_config(d.teacher_recipe)
    if progress is not None:
        progress("teacher", {"recipe": d.teacher_recipe, "out_dir": recipe.out_dir, "teacher": str(where)})
    run_train(recipe, progress=progress)
    if not (where.is_dir() and resolve_model_dir(where) is not None):
        raise ConfigError(
            f"rl.distill.teacher_recipe {d.teacher_recipe} ran, but rl.distill.teacher {where} holds no "
            "model: point the teacher at that recipe's out_dir"
        )


def run_train(
    cfg: TrainConfig,
    *,
    resume: str | Path | None = None,
    progress: Progress | None = None,
    on_trainer: Callable[[RLTrainer], None] | None = None,
    trainer_cls: type[RLTrainer] = RLTrainer,
) -> dict[str, Any]:
    """``verigym train``: SFT first when ``[sft]`` names data or demos, then RL; evaluates before/after.

    ``trainer_cls`` swaps the loop (``verigym.scale`` passes its asynchronous trainer); ``on_trainer``
    sees the trainer before training starts (to wire samplers, pools, process groups).
    """
    t0 = time.perf_counter()
    summary: dict[str, Any] = {}
    if resume is not None:
        _check_format(Path(resume))
    if resume is not None and latest_checkpoint(resume) is None:
        # killed during SFT or before the first RL checkpoint: redo the run from its saved config (the
        # seeds make the redone part identical to what was lost)
        cfg = _saved_config(Path(resume))
        resume = None
    if resume is not None:
        trainer = trainer_cls.resume(resume, progress=progress, steps=None)
        cfg = trainer.cfg
        summary.update(_read_stages(Path(resume)))
        header = train_header(cfg, resumed=True)
        write_header(trainer.out_dir, header)
    else:
        prepare_teacher(cfg, progress=progress)
        out = Path(cfg.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "metrics.jsonl").unlink(missing_ok=True)
        (out / STAGES).unlink(missing_ok=True)
        write_atomic(out / RUN_CONFIG, cfg.model_dump_json(indent=2))  # resumable from here on
        header = train_header(cfg)
        write_header(out, header)
        model, tokenizer = load_model(cfg.model)
        trainer = trainer_cls(cfg, model=model, tokenizer=tokenizer, envs=load_envs(cfg), progress=progress)
        summary.update(_stage(trainer.evaluate(), "initial"))
        if cfg.sft.data or cfg.sft.demos:
            log = MetricsLog(out / "metrics.jsonl")
            sft = _sft_phase(cfg, model, tokenizer, trainer, log, progress)
            summary["sft_steps"] = sft["steps"]
            summary.update(_stage(trainer.evaluate(), "after_sft"))
            record = trainer.training_record("sft", sft["steps"])
            summary["sft_model_dir"] = str(save_final(model, tokenizer, out / "sft", record))
        write_json(out / STAGES, summary)
    if on_trainer is not None:
        on_trainer(trainer)
    first = trainer.step
    trainer.train()
    no_update = None
    if trainer.step > first and not trainer.updates:  # broken (every sample errored, every update
        no_update = no_update_reason(trainer, first)  # skipped) stops the run; no signal is a warning
        if "errored (first" in no_update or "skipped" in no_update:
            raise TrainingHalted(no_update)
    trainer.finish_training()  # AdamW's moments not held through the final eval (~1 GB on SmolLM2)
    final = trainer.evaluate()
    summary.update({"pass_at_1_after_rl": final["eval/pass_at_1"], "steps": trainer.step})
    summary.update(_train_errors(trainer.out_dir))
    if no_update:  # all groups flat: the model is the one training started from, and the run says so
        summary["warning"] = no_update
    summary.update({k: v for k, v in final.items() if k != "eval/pass_at_1"})
    summary["wall_s"] = time.perf_counter() - t0
    model_dir, shared = final_model(trainer)
    summary["model_dir"] = str(model_dir)
    if shared is not None:
        summary["model_files_shared_with"] = str(shared)
    summary.update(disk_usage(trainer.out_dir, summary["model_dir"]))
    ended = header.finished(summary["wall_s"])
    write_header(trainer.out_dir, ended)
    write_summary(trainer.out_dir, summary, ended)  # returned without the header
    if cfg.logging.report:
        write_report(trainer.out_dir, summary=summary)
    return summary
