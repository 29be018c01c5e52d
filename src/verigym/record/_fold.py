"""The record -> summary fold, written once for eval, train and select: error counts by kind, the
first error, reward mean and its bootstrap CI, pass@k, grader means, penalties, stop reasons, tokens.

- ``Aggregate``: the fold, one record at a time, keeping a few numbers per record in flat arrays
  (order key, task, reward, penalty, grader scores), so a run never holds its records. Values are put
  in order-key order before they are summed: the result does not depend on the order in which
  records arrive (a resumed run folds exactly like an uninterrupted one). ``summary()`` is
  ``summary.json``'s numbers (``verigym eval``); ``headline()`` the few a trainer's held-out eval
  logs; ``first_unscored`` and ``first_error`` the line that says why samples were not scored.
- ``fold(records)``: ``Aggregate`` over records in the order given; ``summarize(records)`` its summary.
- ``bootstrap_ci``: a percentile bootstrap (Efron & Tibshirani 1993). With ``groups`` it is a
  cluster bootstrap that resamples whole tasks, since samples of one task are correlated.

A sample is scored when it has no error and a finite reward; errored samples are counted by kind and
kept out of every reward statistic, and a statistic of nothing scored is None, never 0 (pass@k too).
pass@k itself is defined once, in ``verigym._pass_at_k``.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from verigym._pass_at_k import SUCCESS_THRESHOLD, pass_table
from verigym.types import Record

__all__ = ["Aggregate", "bootstrap_ci", "fold", "summarize"]


_DRAWS_PER_CHUNK = 1 << 17


def bootstrap_ci(
    values: Sequence[float],
    *,
    groups: Sequence[str] | None = None,
    confidence: float = 0.95,
    n_resamples: int = 1000,
    seed: int = 0,
) -> tuple[float, float]:
    """A percentile bootstrap interval of the mean of ``values`` (NaN, NaN if empty).

    With ``groups`` (one label per value) whole groups are resampled and the mean is taken over
    all values of the drawn groups.
    """
    if not values:
        return (math.nan, math.nan)
    rng = np.random.default_rng(seed)
    x = np.asarray(values, dtype=float)
    if groups is None:
        sums, counts = x, np.ones(len(x))
    else:
        labels = {g: i for i, g in enumerate(dict.fromkeys(groups))}
        idx = np.fromiter((labels[g] for g in groups), dtype=np.int64, count=len(groups))
        sums = np.bincount(idx, weights=x, minlength=len(labels))
        counts = np.bincount(idx, minlength=len(labels)).astype(float)
    size = len(sums)
    classes, which = np.unique(np.stack([sums, counts], axis=1), axis=0, return_inverse=True)
    means = np.empty(n_resamples)
    if 4 * len(classes) <= size:
        # Few distinct (sum, count) groups (0/1 rewards, k samples each): a resample is then the
        # number of draws from each class, a multinomial; the same distribution in O(classes).
        freq = np.bincount(which.ravel(), minlength=len(classes)) / size
        drawn = rng.multinomial(size, freq, size=n_resamples).astype(float)
        means[:] = (drawn @ classes[:, 0]) / (drawn @ classes[:, 1])
    else:
        rows = max(1, _DRAWS_PER_CHUNK // size)  # resamples drawn at once: memory stays bounded
        same = bool((counts == counts[0]).all())  # every group the same size: the divisor is fixed
        for first in range(0, n_resamples, rows):
            draw = rng.integers(0, size, size=(min(rows, n_resamples - first), size), dtype=np.int32)
            total = np.take(sums, draw).sum(axis=1)
            divisor = counts[0] * size if same else np.take(counts, draw).sum(axis=1)
            means[first : first + len(draw)] = total / divisor
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return (float(lo), float(hi))


def _mean(values: Sequence[float]) -> float | None:
    return float(sum(values) / len(values)) if values else None


def _why_unscored(record: Record) -> str:
    if record.error is not None:
        return f"{record.error.kind}: {record.error.message}"
    if record.score.error:
        return f"grader: {record.score.error}"
    return "no reward"


def _empty_answer(record: Record) -> bool:
    """The model's last completion said nothing: no text (empty or null content) and no tool call,
    finished by stop or length. Still a valid (wrong) answer, counted apart so that a server that
    answers nothing is visible at a glance."""
    for turn in reversed(record.trajectory.turns):
        last = turn.completion
        if last is not None:
            return not last.text.strip() and not last.tool_calls and last.finish_reason in ("stop", "length")
    return False


class Aggregate:
    """A summary built record by record; ``summary()`` gives what ``summarize`` gives.

    ``add(record, order, task)``: ``order`` is the record's unique place in the run (task position
    times samples per task plus sample index, say) and ``task`` its task's position. Statistics are
    computed in ``order`` order, groups in order of their first scored sample.
    """

    def __init__(
        self,
        *,
        samples_per_task: int | None = None,
        success_threshold: float = SUCCESS_THRESHOLD,
        seed: int = 0,
    ) -> None:
        self.samples_per_task = samples_per_task
        self.success_threshold = success_threshold
        self.seed = seed
        self.n_samples = 0
        self.per_task: Counter[int] = Counter()  # samples of each task, whatever their outcome
        self.errors: Counter[str] = Counter()
        self.error_examples: dict[str, tuple[int, str]] = {}  # kind -> (order, message) of its first record
        self._unscored: tuple[int, str] | None = None  # (order, why) of the first record not scored
        self.stop_reasons: Counter[str] = Counter()
        self.tokens = [0, 0, 0]  # prompt, completion, total (every record)
        self.penalties: dict[str, list[int]] = {}  # detector -> [judged, fired, errors]
        # scored records, in arrival order
        self._order = array("q")
        self._task = array("q")
        self._reward = array("d")
        self._penalty = array("d")
        self._graders: dict[str, tuple[array[int], array[float]]] = {}
        self._completion = [0, 0]  # sum, max
        self._truncated = 0
        self._empty = 0
        self._tool_calls = [0, 0]  # parsed calls, malformed tool-call blocks (Completion.malformed)
        self._prefix = [0, 0]  # multi-turn pairs with exact ids, of which the prompt broke the prefix

    def add(self, record: Record, order: int, task: int) -> None:
        self.n_samples += 1
        self.per_task[task] = self.per_task.get(task, 0) + 1
        usage = record.usage
        tokens = self.tokens
        tokens[0] += usage.prompt_tokens
        tokens[1] += usage.completion_tokens
        tokens[2] += usage.prompt_tokens + usage.completion_tokens
        stop = record.trajectory.stop_reason
        self.stop_reasons[stop] = self.stop_reasons.get(stop, 0) + 1
        score = record.score
        error = record.error
        # a non-finite reward (a record written before rewards were checked) is no score either
        scored = error is None and score.reward is not None and math.isfinite(score.reward)
        for name, grade in score.grades.items():
            ok = grade.error is None
            if name.startswith("penalty:"):  # each cheating detector: how often it fired
                seen = self.penalties.setdefault(name[8:], [0, 0, 0])
                seen[0 if ok else 2] += 1
                seen[1] += ok and grade.score > 0.5
            if scored and ok:
                column = self._graders.get(name)
                if column is None:
                    column = self._graders[name] = (array("q"), array("d"))
                column[0].append(order)
                column[1].append(grade.score)
        if not scored:
            kind = error.kind if error is not None else "grader"
            self.errors[kind] += 1
            if error is not None and order < self.error_examples.get(kind, (order + 1, ""))[0]:
                self.error_examples[kind] = (order, error.message)
            if self._unscored is None or order < self._unscored[0]:
                self._unscored = (order, _why_unscored(record))
            return
        self._order.append(order)
        self._task.append(task)
        self._reward.append(score.reward)  # type: ignore[arg-type]  # not None: scored
        self._penalty.append(score.penalty)
        completion = self._completion
        completion[0] += usage.completion_tokens
        if usage.completion_tokens > completion[1]:
            completion[1] = usage.completion_tokens
        self._truncated += stop == "length"
        self._empty += _empty_answer(record)
        for turn in record.trajectory.turns:
            if turn.completion is not None:
                self._tool_calls[0] += len(turn.completion.tool_calls)
                self._tool_calls[1] += turn.completion.malformed.count("tool_call")
        if len(record.trajectory.turns) > 1:
            pairs, breaks = record.trajectory.prefix_breaks
            self._prefix[0] += pairs
            self._prefix[1] += breaks

    @property
    def first_error(self) -> str | None:
        """``KIND: message`` of the first record (order-key order) that carries an error; None if none."""
        if not self.error_examples:
            return None
        kind, (_, message) = min(self.error_examples.items(), key=lambda kv: kv[1][0])
        return f"{kind}: {message}"

    @property
    def first_unscored(self) -> str | None:
        """Why the first record (order-key order) that was not scored was not: its error
        (``KIND: message``), its grading failure (``grader: ...``) or ``no reward``; None if all were."""
        return None if self._unscored is None else self._unscored[1]

    @property
    def n_scored(self) -> int:
        return len(self._reward)

    def grader_means(self) -> dict[str, float | None]:
        """Each grader's mean over the scored records it graded without an error (name order)."""
        return {
            name: _mean(_in_order(orders, scores)) for name, (orders, scores) in sorted(self._graders.items())
        }

    def _sorted(self) -> tuple[np.ndarray, np.ndarray]:
        """Rewards and tasks of the scored records, in order-key order."""
        idx = np.argsort(np.asarray(self._order, dtype=np.int64), kind="stable")
        return np.asarray(self._reward, dtype=float)[idx], np.asarray(self._task, dtype=np.int64)[idx]

    def headline(self) -> dict[str, Any]:
        """The numbers a trainer's held-out eval logs, from the same fold as ``summary()``: pass@1,
        reward mean (None when nothing was scored), samples, errors and the first error (its record's
        error, else ``no reward`` when some sample was not scored), each grader's mean."""
        rewards, tasks = self._sorted()
        out: dict[str, Any] = {
            "pass_at_1": pass_table(rewards >= self.success_threshold, tasks, 1)["1"],
            "reward_mean": _mean(rewards.tolist()),
            "n_samples": self.n_samples,
            "n_errors": self.n_samples - len(self._reward),
            "grader_means": self.grader_means(),
        }
        if out["n_errors"]:
            out["first_error"] = self.first_error or "no reward"
        return out

    def grader_scores(self) -> dict[str, list[tuple[int, float]]]:
        """Per grader, ``(task, score)`` of each scored record that it graded, in order-key order."""
        task_of = dict(zip(self._order, self._task, strict=True))
        return {
            name: [(task_of[o], s) for o, s in sorted(zip(orders, scores, strict=True))]
            for name, (orders, scores) in sorted(self._graders.items())
        }

    def rewards(self) -> list[float]:
        """The rewards of the scored records (arrival order)."""
        return self._reward.tolist()

    def summary(self, wall_s: float | None = None) -> dict[str, Any]:
        """The summary dict (see ``summarize``)."""
        ok = len(self._reward)
        idx = np.argsort(np.asarray(self._order, dtype=np.int64), kind="stable")
        rewards, tasks = self._sorted()
        reward_list = rewards.tolist()
        lo, hi = bootstrap_ci(reward_list, groups=tasks.tolist(), seed=self.seed)
        k_max = self.samples_per_task or max(self.per_task.values(), default=0)
        return {
            "n_tasks": len(self.per_task),
            "n_samples": self.n_samples,
            "n_scored": ok,
            "n_errors": self.n_samples - ok,
            "empty_answers": self._empty,
            "errors_by_kind": dict(sorted(self.errors.items())),
            "reward_mean": _mean(reward_list),
            "reward_ci95": [lo, hi] if ok else None,
            "success_threshold": self.success_threshold,
            "pass_at_k": pass_table(rewards >= self.success_threshold, tasks, k_max),
            "grader_means": self.grader_means(),
            "penalties": {
                name: {"judged": j, "fired": f, "errors": e, "rate": f / j if j else None}
                for name, (j, f, e) in sorted(self.penalties.items())
            },
            "penalty_mean": _mean(np.asarray(self._penalty, dtype=float)[idx].tolist()),
            "stop_reasons": dict(sorted(self.stop_reasons.items())),
            "completion_tokens_mean": self._completion[0] / ok if ok else None,
            "completion_tokens_max": self._completion[1] if ok else None,
            "truncation_rate": self._truncated / ok if ok else None,
            "prefix_breaks": {"turn_pairs": self._prefix[0], "breaks": self._prefix[1]},
            "tool_call_parse_failures": self._tool_calls[1],
            "tool_call_parse_failure_rate": self._tool_calls[1] / sum(self._tool_calls)
            if sum(self._tool_calls)
            else None,
            "prompt_tokens": self.tokens[0],
            "completion_tokens": self.tokens[1],
            "total_tokens": self.tokens[2],
            "wall_s": wall_s,
        }


def _in_order(orders: array[int], values: array[float]) -> list[float]:
    idx = np.argsort(np.asarray(orders, dtype=np.int64), kind="stable")
    return np.asarray(values, dtype=float)[idx].tolist()  # type: ignore[no-any-return]


def fold(
    records: Iterable[Record],
    *,
    samples_per_task: int | None = None,
    success_threshold: float = SUCCESS_THRESHOLD,
    seed: int = 0,
) -> Aggregate:
    """``Aggregate`` of ``records`` in the order given (tasks numbered by first appearance)."""
    aggregate = Aggregate(samples_per_task=samples_per_task, success_threshold=success_threshold, seed=seed)
    tasks: dict[str, int] = {}
    for order, record in enumerate(records):
        aggregate.add(record, order, tasks.setdefault(record.task_id, len(tasks)))
    return aggregate


def summarize(
    records: Sequence[Record],
    *,
    samples_per_task: int | None = None,
    success_threshold: float = SUCCESS_THRESHOLD,
    wall_s: float | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """The summary of an eval: counts, errors by kind, empty answers, reward mean and 95% CI, pass@k, per-grader
    means, completion token stats, truncation rate, tokens used and wall time.

    A sample is correct for pass@k when its reward is ≥ ``success_threshold``. pass@k for
    k = 1..K (K = ``samples_per_task``, default the most samples of any task) is averaged over the
    tasks with at least k scored samples; errored samples are left out of n.
    """
    aggregate = fold(
        records, samples_per_task=samples_per_task, success_threshold=success_threshold, seed=seed
    )
    return aggregate.summary(wall_s)
