"""``run_experiment``: what ``verigym select`` does once it has an environment, a policy and tasks.

Samples ``max(ns)`` traces per task through ``verigym.runner`` (records appended to
``results.jsonl``), measures every method at every N (``verigym.select.run``), and writes
``summary.json`` (with the run header, ``verigym.record``; ``run.json`` holds it from the start) and
``report.html``. Prints nothing: progress goes through callbacks.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verigym.envs.base import Environment
from verigym.policies.base import Policy
from verigym.record import RunHeader, fold, new_header, with_header, write_header
from verigym.runner import run_rollouts
from verigym.select._summary import build_summary, write_report, write_summary
from verigym.select.methods import needs_logprobs
from verigym.select.run import SelectConfig, TaskPool, build_pools, measure, oracle_points
from verigym.types import Record, Sampling, Task

__all__ = ["ExperimentResult", "run_experiment"]


@dataclass
class ExperimentResult:
    summary: dict[str, Any]
    pools: list[TaskPool]
    records: list[Record]
    out: Path | None


async def run_experiment(
    env: Environment,
    policy: Policy,
    tasks: Sequence[Task],
    cfg: SelectConfig,
    *,
    sampling: Sampling,
    concurrency: int = 32,
    judge: Policy | None = None,
    out: Path | None = None,
    env_name: str = "",
    model_name: str = "",
    records: Sequence[Record] | None = None,
    on_record: Callable[[Record], None] | None = None,
    on_select: Callable[[str, int, int], None] | None = None,
    extra_meta: dict[str, Any] | None = None,
) -> ExperimentResult:
    """Sample (unless ``records`` are given), measure, and write the outputs to ``out``.

    When a DeepConf method is requested, sampling asks for ``top_logprobs=cfg.k``; a policy that
    returns none makes DeepConf raise ``ValueError`` with what to change.
    """
    samples = max(cfg.ns)
    if needs_logprobs(cfg.methods):
        sampling = sampling.model_copy(update={"logprobs": True, "top_logprobs": cfg.k})
    start = time.perf_counter()
    header = _header(cfg, sampling, env_name, model_name or policy.name, judge, len(tasks))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        write_header(out, header)
    if records is None:
        writer = None
        if out is not None:
            from verigym.eval.store import ResultsWriter

            writer = ResultsWriter(out / "results.jsonl")

        def keep(r: Record) -> None:
            if writer is not None:
                writer.write(r)
            if on_record is not None:
                on_record(r)

        try:
            records = await run_rollouts(
                env,
                policy,
                tasks,
                samples_per_task=samples,
                sampling=sampling,
                concurrency=concurrency,
                on_record=keep,
                env_name=env_name,
                model_name=model_name or policy.name,
            )
        finally:
            if writer is not None:
                writer.close()
    sample_s = time.perf_counter() - start
    pools = build_pools(env, tasks, records, cfg.success_threshold)
    warnings = []
    failed = [r for r in records if r.error is not None]
    if records and len(failed) == len(records):
        first = failed[0].error
        reason = f"{first.kind}: {first.message}" if first is not None else "unknown"
        raise ValueError(f"every sample errored (first: {reason}); nothing to select from")
    if needs_logprobs(cfg.methods) and not any(c.top_logprobs for p in pools for c in p.candidates):
        raise ValueError(
            "DeepConf needs top-k logprobs but the policy returned none; use a policy/server that "
            "supports logprobs=True, top_logprobs=k, or drop the deepconf methods"
        )
    folded = fold(records, samples_per_task=samples, success_threshold=cfg.success_threshold)
    errors = folded.n_samples - folded.n_scored  # the eval's rule: an error, or no (finite) reward
    first_error = folded.first_unscored
    if errors:
        warnings.append(f"{errors} samples errored; they do not vote but their tokens count")
    t1 = time.perf_counter()
    points = await measure(pools, cfg, judge=judge, progress=on_select)
    meta: dict[str, Any] = {
        "env": env_name,
        "model": model_name or policy.name,
        "judge": None if judge is None else judge.name,
        "tasks": len(tasks),
        "samples": samples,
        "ns": sorted({n for n in cfg.ns if n <= samples}),
        "draws": cfg.draws,
        "seed": cfg.seed,
        "sampling": sampling.model_dump(),
        "deepconf": {
            "eta": cfg.eta,
            "score": cfg.score,
            "window": cfg.window,
            "fraction": cfg.fraction,
            "k": cfg.k,
            "warmup": cfg.warmup or "min(16, max(1, N//4))",
        },
        "genselect_window": cfg.genselect_window,
        "success_threshold": cfg.success_threshold,
        "sample_errors": errors,
        "samples_total": len(records),
        "first_error": first_error,
        "sampling_s": sample_s,
        "selection_s": time.perf_counter() - t1,
        "warnings": warnings,
        **(extra_meta or {}),
    }
    summary = build_summary(points, oracle_points(pools, cfg.ns, cfg.draws, cfg.seed), meta)
    if out is not None:
        ended = header.finished(time.perf_counter() - start)
        write_header(out, ended)
        write_summary(out, with_header(summary, ended))
        write_report(out, summary)
    return ExperimentResult(summary=summary, pools=pools, records=list(records), out=out)


def _header(
    cfg: SelectConfig, sampling: Sampling, env: str, model: str, judge: Policy | None, tasks: int
) -> RunHeader:
    """The run header of a select experiment starting now: its methods, Ns, knobs and sampling."""
    knobs = {k: v for k, v in vars(cfg).items() if k not in ("grader", "judge_sampling")}
    config: dict[str, Any] = {
        "env": env,
        "model": model,
        "judge": None if judge is None else judge.name,
        "tasks": tasks,
        **knobs,
        "grader": None if cfg.grader is None else type(cfg.grader).__name__,
        "judge_sampling": cfg.judge_sampling.model_dump(mode="json"),
        "sampling": sampling.model_dump(mode="json"),
    }
    seeds = {"seed": cfg.seed} if sampling.seed is None else {"seed": cfg.seed, "sampling": sampling.seed}
    return new_header("select", config, seeds=seeds)
