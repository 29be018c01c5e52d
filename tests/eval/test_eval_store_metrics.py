"""The results store (append, torn lines, resume) and the metrics (pass@k, bootstrap, summary)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import pytest

from verigym.eval.metrics import bootstrap_ci, pass_at_k, summarize
from verigym.eval.store import ResultsWriter, StoreError, load_records, prepare_resume
from verigym.types import (
    Completion,
    ErrorInfo,
    Grade,
    Message,
    Record,
    Sampling,
    Score,
    Trajectory,
    Turn,
    Usage,
)


def rec(
    task: str, i: int, reward: float | None, *, error: str | None = None, tokens: int = 3, stop: str = "done"
) -> Record:
    traj = Trajectory(
        task_id=task, sample_index=i, prompt=[Message(role="user", content="q")], stop_reason=stop
    )  # type: ignore[arg-type]
    comp = Completion(text="a", usage=Usage(prompt_tokens=2, completion_tokens=tokens))
    traj.turns.append(Turn(source="model", messages=[comp.as_message()], completion=comp))
    if error:
        score = Score(grades={}, error=error)
        err = ErrorInfo(kind=error, message=f"{error} happened")
    else:
        score = Score(grades={"correct": Grade(score=reward or 0.0)}, reward=reward)
        err = None
    return Record(
        env="e",
        model="m",
        task_id=task,
        sample_index=i,
        sampling=Sampling(),
        trajectory=traj,
        score=score,
        usage=traj.usage,
        wall_s=0.1,
        error=err,
    )


def test_pass_at_k_matches_brute_force() -> None:
    for n, c, k in [(5, 2, 1), (5, 2, 3), (6, 0, 2), (4, 4, 4), (10, 3, 5)]:
        samples = [1] * c + [0] * (n - c)
        combos = list(itertools.combinations(samples, k))
        assert pass_at_k(n, c, k) == pytest.approx(sum(any(x) for x in combos) / len(combos))
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


def test_bootstrap_ci_brackets_the_mean() -> None:
    values = [0.0, 1.0] * 50
    lo, hi = bootstrap_ci(values)
    assert lo < 0.5 < hi and hi - lo < 0.3
    lo2, hi2 = bootstrap_ci(values, groups=[f"t{i // 2}" for i in range(100)])
    assert lo2 == hi2 == 0.5  # every task has mean 0.5: resampling tasks cannot move it
    assert all(math.isnan(x) for x in bootstrap_ci([]))
    # 0/1 rewards, 2 samples per task: few distinct task sums, drawn as a multinomial
    binary = [float(i % 3 == 0) for i in range(800)]
    lo3, hi3 = bootstrap_ci(binary, groups=[f"t{i // 2}" for i in range(800)])
    mean = sum(binary) / 800
    assert lo3 < mean < hi3 and 0.04 < hi3 - lo3 < 0.1  # ~2 x 1.96 x 0.33 x 0.67 / sqrt(400 x 2)
    continuous = [((i * 7919) % 1000) / 1000 for i in range(800)]  # 400 distinct task sums: drawn by index
    lo4, hi4 = bootstrap_ci(continuous, groups=[f"t{i // 2}" for i in range(800)])
    assert lo4 < sum(continuous) / 800 < hi4


def test_summary_keeps_errors_apart() -> None:
    records = [
        rec("a", 0, 1.0),
        rec("a", 1, 0.0),
        rec("b", 0, 0.0, tokens=9, stop="length"),
        rec("b", 1, None, error="timeout"),
    ]
    s = summarize(records, samples_per_task=2)
    assert s["n_samples"] == 4 and s["n_scored"] == 3 and s["n_errors"] == 1
    assert s["errors_by_kind"] == {"timeout": 1}
    assert s["reward_mean"] == pytest.approx(1 / 3)
    assert s["pass_at_k"]["1"] == pytest.approx((0.5 + 0.0) / 2)
    assert s["pass_at_k"]["2"] == pytest.approx(1.0)  # task b has one scored sample: not counted at k=2
    assert s["completion_tokens_max"] == 9 and s["truncation_rate"] == pytest.approx(1 / 3)
    assert s["grader_means"] == {"correct": pytest.approx(1 / 3)}


def test_store_appends_and_survives_a_torn_line(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with ResultsWriter(path) as w:
        for i in range(3):
            w.write(rec("a", i, 1.0))
    with path.open("a") as fh:
        fh.write(rec("a", 3, 1.0).model_dump_json()[:40])  # killed mid-write
    assert [r.sample_index for r in load_records(path)] == [0, 1, 2]
    with ResultsWriter(path) as w:  # a new writer cuts the torn tail first
        w.write(rec("a", 3, 1.0))
    assert [r.sample_index for r in load_records(path)] == [0, 1, 2, 3]
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], "{oops", *lines[1:]]) + "\n")
    with pytest.raises(StoreError, match=r"r.jsonl:2"):
        load_records(path)


def test_prepare_resume_keeps_finished_and_drops_errored(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with ResultsWriter(path) as w:
        w.write(rec("a", 0, 1.0))
        w.write(rec("a", 1, None, error="server"))
        w.write(rec("b", 0, None, error="server"))
        w.write(rec("b", 0, 0.0))  # a later line wins
    skip = prepare_resume(path)
    assert skip == {("a", 0), ("b", 0)}
    assert [(r.task_id, r.sample_index) for r in load_records(path)] == [("a", 0), ("b", 0)]
    assert [r.score.reward for r in load_records(path)] == [1.0, 0.0]  # b's later line won
    assert prepare_resume(tmp_path / "missing.jsonl") == set()


def test_resume_with_group_graders_redoes_whole_groups(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with ResultsWriter(path) as w:
        for i in range(3):
            w.write(rec("a", i, 1.0))
        w.write(rec("b", 0, 1.0))
        w.write(rec("b", 1, None, error="server"))
        w.write(rec("b", 2, 1.0))
    skip = prepare_resume(path, whole_groups_of=3)
    assert skip == {("a", 0), ("a", 1), ("a", 2)}
    assert {r.task_id for r in load_records(path)} == {"a"}


def test_config_precedence_flags_over_toml_over_defaults(tmp_path: Path) -> None:
    from verigym._cli._eval_run import resolve_config

    toml = tmp_path / "c.toml"
    toml.write_text(
        'env = "arithmetic"\nnum_tasks = 3\nseed = 5\nbase_url = "http://a/v1"\n[env_args]\nlevel = 2\nops = "+"\n'
    )
    flags = {"num_tasks": 2, "env_args": {"level": 3}, "model": None}
    config, _ = resolve_config(flags, toml, resume=False)
    assert (config.env, config.num_tasks, config.seed, config.base_url) == (
        "arithmetic",
        2,
        5,
        ["http://a/v1"],
    )
    assert config.env_args == {"level": 3, "ops": "+"} and config.samples_per_task == 1


def test_aggregate_is_the_same_whatever_the_arrival_order() -> None:
    import random

    from verigym.eval.metrics import Aggregate
    from verigym.eval.report import Examples

    rng = random.Random(0)
    records = [
        rec(f"t{t}", i, None, error="timeout") if rng.random() < 0.1 else rec(f"t{t}", i, rng.random() / 3)
        for t in range(40)
        for i in range(3)
    ]
    placed = [(r, t * 3 + r.sample_index, t) for t in range(40) for r in records[t * 3 : t * 3 + 3]]
    results = []
    for shuffle in (False, True):
        if shuffle:
            rng.shuffle(placed)
        agg = Aggregate(samples_per_task=3, success_threshold=0.2, seed=1)
        ex = Examples(limit=12)
        for r, order, task in placed:
            agg.add(r, order, task)
            ex.add(r, order)
        results.append((agg.summary(1.0), [(r.task_id, r.sample_index) for r in ex.chosen()]))
    assert results[0] == results[1]  # exactly: sums and the bootstrap run in task then sample order
    summary, chosen = results[0]
    assert summary == summarize(records, samples_per_task=3, success_threshold=0.2, wall_s=1.0, seed=1)
    assert len(chosen) == 12 and len(set(chosen)) == 12
    errored = [(r.task_id, r.sample_index) for r in records if r.error is not None]
    assert errored[:4] == [c for c in chosen if c in errored][:4]  # the first errored ones are shown
    lowest = min((r for r in records if r.error is None), key=lambda r: r.score.reward or 0.0)
    assert (lowest.task_id, lowest.sample_index) in chosen


def test_iter_latest_streams_the_last_line_of_each_key(tmp_path: Path) -> None:
    from verigym.eval.store import iter_latest

    path = tmp_path / "r.jsonl"
    with ResultsWriter(path) as w:
        w.write(rec("a", 0, 0.0))
        w.write(rec("b", 0, 1.0))
        w.write(rec("a", 0, 1.0))
    assert [(r.task_id, r.score.reward) for r in iter_latest(path)] == [("b", 1.0), ("a", 1.0)]
    assert list(iter_latest(tmp_path / "missing.jsonl")) == []


def test_writer_hands_one_loop_turn_over_in_one_write(tmp_path: Path) -> None:
    import asyncio

    path = tmp_path / "r.jsonl"
    records = [rec("a", i, 1.0) for i in range(3)]
    assert records[0].__pydantic_serializer__.to_json(records[0]).decode() == records[0].model_dump_json()

    async def run() -> list[int]:
        seen = []
        with ResultsWriter(path) as w:
            for r in records:
                w.write(r)
            seen.append(path.read_bytes().count(b"\n"))  # still this turn: nothing written yet
            await asyncio.sleep(0)
            seen.append(path.read_bytes().count(b"\n"))  # the next turn began with the write
            w.write(rec("b", 0, 1.0))
        seen.append(path.read_bytes().count(b"\n"))  # close writes what is left
        return seen

    assert asyncio.run(run()) == [0, 3, 4]


def test_writer_cuts_a_torn_tail_of_a_long_file(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    line = rec("a", 0, 1.0).model_dump_json() + "\n"
    body = line * (200_000 // len(line) + 1)
    path.write_text(body + '{"torn": ' + "x" * 70_000)  # a torn line longer than one read block
    with ResultsWriter(path) as w:
        w.write(rec("b", 0, 1.0))
    assert path.read_text() == body + rec("b", 0, 1.0).model_dump_json() + "\n"
