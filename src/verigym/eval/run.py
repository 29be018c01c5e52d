"""An eval run on disk: results streamed to ``results.jsonl``, then ``summary.json`` and ``report.html``.

``evaluate`` is what ``verigym eval`` calls once it has an environment, a policy and tasks; it
prints nothing (progress goes through ``on_record``). A resumed run keeps finished records,
redoes errored ones, and recomputes the summary from the file.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verigym.envs.base import Environment
from verigym.eval.config import ConfigError, EvalConfig, write_config_json
from verigym.eval.metrics import summarize
from verigym.eval.store import ResultsWriter, latest, load_records, prepare_resume
from verigym.policies.base import Policy
from verigym.runner import run_rollouts
from verigym.types import Record, Task

__all__ = ["EvalResult", "evaluate", "finish", "results_path"]


@dataclass
class EvalResult:
    out: Path
    summary: dict[str, Any]
    records: list[Record]
    written: int  # records produced by this invocation
    skipped: int  # finished records kept from before (a resumed run)


def results_path(out: str | Path) -> Path:
    return Path(out) / "results.jsonl"


def finish(
    out: Path, config: EvalConfig, tasks: Sequence[Task], *, wall_s: float | None
) -> tuple[dict[str, Any], list[Record]]:
    """Recompute the summary from ``results.jsonl`` and write ``summary.json`` and ``report.html``.

    Only records of the run's tasks and sample indices count, in task order then sample order,
    so a resumed run summarises exactly like an uninterrupted one.
    """
    order = {t.id: i for i, t in enumerate(tasks)}
    k = config.samples_per_task
    records = [
        r
        for r in latest(load_records(results_path(out))).values()
        if r.task_id in order and r.sample_index < k
    ]
    records.sort(key=lambda r: (order[r.task_id], r.sample_index))
    summary = summarize(
        records,
        samples_per_task=k,
        success_threshold=config.success_threshold,
        wall_s=wall_s,
        seed=config.seed,
    )
    summary["n_expected"] = len(tasks) * k
    from verigym.eval.report import write_report  # matplotlib: imported when the report is written

    tmp = out / "summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=2), encoding="utf-8")
    tmp.replace(out / "summary.json")
    write_report(out / "report.html", records, summary, config.model_dump(mode="json"))
    return summary, records


async def evaluate(
    env: Environment,
    policy: Policy,
    tasks: Sequence[Task],
    config: EvalConfig,
    *,
    out: Path,
    resume: bool = False,
    model_name: str | None = None,
    policy_description: str = "",
    on_start: Callable[[int, int], None] | None = None,
    on_record: Callable[[Record], None] | None = None,
) -> EvalResult:
    """Run (or resume) an eval into ``out`` and return its summary.

    ``on_start(total, already_done)`` is called once the work is known; ``on_record`` with each
    finished record. Raises ``ConfigError`` when ``out`` already holds results and ``resume`` is
    False (nothing is overwritten).
    """
    out.mkdir(parents=True, exist_ok=True)
    path = results_path(out)
    k = config.samples_per_task
    wanted = {(t.id, i) for t in tasks for i in range(k)}
    if resume:
        group = k if env.rubric.has_group_graders else None
        _, skip = prepare_resume(path, whole_groups_of=group)
        skip &= wanted
    else:
        if path.exists() and path.stat().st_size > 0:
            raise ConfigError(
                f"{path} already holds results: add --resume to continue that run, or pick another --out"
            )
        skip = set()
    name = model_name or policy.name
    write_config_json(
        out, config, policy=policy_description or name, extra={"tasks": len(tasks), "resumed": resume}
    )
    if on_start is not None:
        on_start(len(wanted), len(skip))
    start = time.perf_counter()
    with ResultsWriter(path) as writer:

        def record(r: Record) -> None:
            writer.write(r)
            if on_record is not None:
                on_record(r)

        await run_rollouts(
            env,
            policy,
            tasks,
            samples_per_task=k,
            sampling=config.sampling(),
            concurrency=config.concurrency,
            skip=skip,
            on_record=record,
            env_name=config.env,
            model_name=name,
            keep_records=False,  # they are on disk; the summary is recomputed from the file
        )
        written = writer.written
    summary, records = finish(out, config, tasks, wall_s=time.perf_counter() - start)
    return EvalResult(out=out, summary=summary, records=records, written=written, skipped=len(skip))
