"""An eval run on disk: ``run.json`` (the run header, ``verigym.record``) and results streamed to
``results.jsonl``, then ``summary.json`` (with the header) and ``report.html``.

``evaluate`` is what ``verigym eval`` calls once it has an environment, a policy and tasks; it
prints nothing (progress goes through ``on_record``). A resumed run keeps finished records,
redoes errored ones, and summarises the kept and the new records together.

Memory does not grow with the records: each one is appended to the file and folded into a
``Tally`` (a few numbers per record for the summary, a bounded set of examples for the report), so
the summary and report need no second reading of the file.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, overload

from verigym._files import write_json
from verigym.envs.base import Environment
from verigym.eval.config import ConfigError, EvalConfig, write_config_json
from verigym.eval.metrics import Aggregate
from verigym.eval.report import Examples
from verigym.eval.store import ResultsWriter, iter_latest, iter_records, prepare_resume
from verigym.policies.base import Policy
from verigym.record import (
    RUN_FILE,
    RunFormatError,
    RunHeader,
    new_header,
    read_run,
    with_header,
    write_header,
)
from verigym.runner import run_rollouts
from verigym.types import Record, Task

__all__ = [
    "EvalResult",
    "Tally",
    "check_resumable",
    "errors_fail",
    "eval_header",
    "evaluate",
    "finish",
    "results_path",
]


class _RunFile:
    """A file of the run's folder, read as an attribute (``result.summary_file``: ``out/summary.json``)."""

    def __init__(self, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, run: None, owner: type) -> _RunFile: ...
    @overload
    def __get__(self, run: EvalResult, owner: type | None = None) -> Path: ...
    def __get__(self, run: EvalResult | None, owner: type | None = None) -> Path | _RunFile:
        return self if run is None else run.out / self.name


@dataclass
class EvalResult:
    """A finished run: its folder, summary and record counts (``config``: set by ``verigym.evaluate``)."""

    out: Path
    summary: dict[str, Any]
    written: int  # records produced by this invocation
    skipped: int  # finished records kept from before (a resumed run)
    config: EvalConfig | None = None  # the options the run resolved to

    results_file = _RunFile("results.jsonl")
    summary_file = _RunFile("summary.json")
    report_file = _RunFile("report.html")
    config_file = _RunFile("config.json")
    run_file = _RunFile(RUN_FILE)


def errors_fail(summary: dict[str, Any], fail_on_error: bool | float) -> bool:
    """Whether the errored samples of ``summary`` reach ``fail_on_error`` (``EvalConfig``'s, read as
    inspect_ai reads its own): True at any error, False never, a fraction (< 1) of the samples asked
    for, or a count (>= 1). A run whose every sample errored fails whatever the threshold."""
    errors = int(summary.get("n_errors") or 0)
    if not errors:
        return False
    if not summary.get("n_scored"):
        return True
    if isinstance(fail_on_error, bool):
        return fail_on_error
    if fail_on_error < 1:
        total = max(int(summary.get("n_expected") or 0), int(summary.get("n_samples") or 0))
        return errors >= fail_on_error * total
    return errors >= fail_on_error


def results_path(out: str | Path) -> Path:
    return Path(out) / "results.jsonl"


class Tally:
    """The summary and the report's examples of one run, fed record by record (``add``).

    Only records of the run's tasks and sample indices count; each is placed by task order then
    sample index, so the result does not depend on the order in which records arrive.
    """

    def __init__(self, tasks: Sequence[Task], config: EvalConfig, env: Environment | None = None) -> None:
        self._tasks = list(tasks)
        self._env = env
        self._pos = {t.id: i for i, t in enumerate(tasks)}
        self.n_expected = len(tasks) * config.samples_per_task
        self._k = config.samples_per_task
        self.metrics = Aggregate(
            samples_per_task=self._k, success_threshold=config.success_threshold, seed=config.seed
        )
        self.examples = Examples()

    def wanted(self, task_id: str, sample_index: int) -> bool:
        return task_id in self._pos and sample_index < self._k

    def add(self, record: Record) -> None:
        pos = self._pos.get(record.task_id)
        if pos is None or record.sample_index >= self._k:
            return
        order = pos * self._k + record.sample_index
        self.metrics.add(record, order, pos)
        self.examples.add(record, order)

    def env_metrics(self) -> dict[str, Any]:
        """The environment's own metrics of the run (``Environment.summary_metrics``; {} without one)."""
        if self._env is None:
            return {}
        return self._env.summary_metrics(self._tasks, self.metrics.grader_scores())


def eval_header(config: EvalConfig, *, resumed: bool = False) -> RunHeader:
    """The run header of an eval starting now (``run.json``; ``summary.json``'s ``run``)."""
    return new_header("eval", config.model_dump(mode="json"), seeds={"seed": config.seed}, resumed=resumed)


def check_resumable(out: Path) -> None:
    """``ConfigError`` (one line) when the run in ``out`` was written in a run-record format this
    verigym does not read (a newer ``format_version``): resuming it would mix two formats."""
    if (out / RUN_FILE).is_file() or (out / "summary.json").is_file():
        try:
            read_run(out)
        except RunFormatError as exc:
            raise ConfigError(f"--resume: {exc}") from None


def finish(
    out: Path,
    config: EvalConfig,
    tasks: Sequence[Task],
    *,
    wall_s: float | None,
    tally: Tally | None = None,
    env: Environment | None = None,
    header: RunHeader | None = None,
) -> dict[str, Any]:
    """Write ``summary.json`` and ``report.html`` of the run in ``out`` and return the summary (as written).

    Without ``tally`` it is rebuilt by streaming ``results.jsonl`` (the latest line of each key);
    ``env`` then adds its own metrics (``Environment.summary_metrics``). ``summary.json`` and
    ``run.json`` carry ``header`` (a new one when not given), marked finished after ``wall_s``.
    """
    if tally is None:
        tally = Tally(tasks, config, env)
        for record in iter_latest(results_path(out)):
            tally.add(record)
    summary = tally.metrics.summary(wall_s)
    summary["n_expected"] = tally.n_expected
    if config.env_args:  # which came from where: the user, the checkpoint's training, a real model's
        summary["env_args"] = dict(config.env_args)
        summary["env_args_from"] = {k: config.env_args_from.get(k, "user") for k in config.env_args}
    examples = tally.metrics.error_examples
    if examples:  # the first errored sample of the run (task order), for the one-line notice
        kind, (_, message) = min(examples.items(), key=lambda kv: kv[1][0])
        summary["first_error"] = f"{kind}: {message}"
        # each kind's first reason (task order), beside ``errors_by_kind``'s counts
        summary["error_examples"] = {k: m for k, (_, m) in sorted(examples.items())}
    extra = tally.env_metrics()
    if extra:  # only environments with metrics of their own (ifeval): other summaries keep their keys
        summary["env_metrics"] = extra
    from verigym.eval.report import write_report

    ended = (header or eval_header(config)).finished(wall_s)
    write_header(out, ended)
    written = with_header(summary, ended)
    write_json(out / "summary.json", written)  # valid JSON: a non-finite number is null, its path listed
    write_report(
        out / "report.html",
        summary,
        config.model_dump(mode="json"),
        rewards=tally.metrics.rewards(),
        examples=tally.examples.chosen(),
        error_examples={kind: message for kind, (_, message) in tally.metrics.error_examples.items()},
    )
    return written


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
    tally = Tally(tasks, config, env)
    if resume:
        check_resumable(out)
        group = config.samples_per_task if env.rubric.has_group_graders else None
        kept = prepare_resume(path, whole_groups_of=group)
        skip = {k for k in kept if tally.wanted(*k)}
        for r in iter_records(path):  # compacted: one finished line per key
            tally.add(r)
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
    header = eval_header(config, resumed=resume)
    write_header(out, header)
    if on_start is not None:
        on_start(tally.n_expected, len(skip))
    start = time.perf_counter()
    with ResultsWriter(path) as writer:

        def record(r: Record) -> None:
            writer.write(r)
            tally.add(r)
            if on_record is not None:
                on_record(r)

        await run_rollouts(
            env,
            policy,
            tasks,
            samples_per_task=config.samples_per_task,
            sampling=config.sampling(),
            concurrency=config.concurrency,
            skip=skip,
            on_record=record,
            env_name=config.env,
            model_name=name,
            keep_records=False,  # they are on disk and in the tally
        )
        written = writer.written
    summary = finish(out, config, tasks, wall_s=time.perf_counter() - start, tally=tally, header=header)
    return EvalResult(out=out, summary=summary, written=written, skipped=len(skip))
