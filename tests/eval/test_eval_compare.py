"""verigym compare: paired bootstrap CI on synthetic runs, per-task deltas, HTML, the CLI."""

from __future__ import annotations

import random
from pathlib import Path

from typer.testing import CliRunner

from verigym.cli import app
from verigym.eval.compare import compare_records, compare_runs, paired_bootstrap, write_comparison
from verigym.eval.store import write_records
from verigym.types import ErrorInfo, Grade, Message, Record, Sampling, Score, Trajectory, Usage


def _record(task: str, i: int, reward: float | None, *, error: bool = False) -> Record:
    score = (
        Score(grades={"correct": Grade(score=reward or 0.0)}, reward=reward)
        if not error
        else Score(error="x")
    )
    return Record(
        env="e", model="m", task_id=task, sample_index=i, sampling=Sampling(),
        trajectory=Trajectory(task_id=task, prompt=[Message(role="user", content=task)]),
        score=score, usage=Usage(), wall_s=0.0,
        error=ErrorInfo(kind="policy", message="boom") if error else None,
    )  # fmt: skip


def _runs(n: int, p_a: float, p_b: float, seed: int) -> tuple[list[Record], list[Record]]:
    rng = random.Random(seed)
    a, b = [], []
    for t in range(n):
        hard = rng.random() < 0.5  # a shared task difficulty makes the runs correlated
        for i in range(2):
            a.append(_record(f"t{t}", i, float(rng.random() < (p_a - 0.2 if hard else p_a + 0.2))))
            b.append(_record(f"t{t}", i, float(rng.random() < (p_b - 0.2 if hard else p_b + 0.2))))
    return a, b


def test_paired_bootstrap_covers_the_truth() -> None:
    a, b = _runs(300, 0.4, 0.6, seed=1)
    comp = compare_records(a, b)
    assert comp.ci95 is not None and comp.delta is not None
    assert comp.ci95[0] < 0.2 < comp.ci95[1]
    assert comp.ci95[0] > 0  # clearly better
    assert comp.p_b_not_better is not None and comp.p_b_not_better < 0.01
    same_a, same_b = _runs(300, 0.5, 0.5, seed=2)
    same = compare_records(same_a, same_b)
    assert same.ci95 is not None and same.ci95[0] < 0 < same.ci95[1]


def test_paired_bootstrap_exact_cases() -> None:
    delta, (lo, hi), p = paired_bootstrap([0.0, 0.5, 1.0], [0.5, 1.0, 1.5])
    assert (delta, lo, hi, p) == (0.5, 0.5, 0.5, 0.0)  # a constant shift has a zero-width interval


def test_compare_pairs_tasks_and_counts_errors(tmp_path: Path) -> None:
    a = [_record("t1", 0, 1.0), _record("t2", 0, 0.0), _record("t3", 0, 1.0)]
    b = [
        _record("t1", 0, 1.0),
        _record("t2", 0, 1.0),
        _record("t3", 0, None, error=True),
        _record("t4", 0, 1.0),
    ]
    comp = compare_records(a, b)
    assert [(t.task_id, t.delta) for t in comp.tasks] == [("t1", 0.0), ("t2", 1.0)]
    assert comp.only_a == ["t3"] and comp.only_b == ["t4"] and comp.errors_b == 1
    assert comp.grader_deltas == {"correct": 0.5}
    page = write_comparison(comp, tmp_path / "c.html").read_text()
    assert "paired bootstrap" in page and "data:image/png;base64" in page


def test_compare_cli(tmp_path: Path) -> None:
    a, b = _runs(40, 0.3, 0.7, seed=3)
    for name, recs in (("a", a), ("b", b)):
        (tmp_path / name).mkdir()
        write_records(tmp_path / name / "results.jsonl", recs)
    result = CliRunner().invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b")])
    assert result.exit_code == 0, result.output
    assert "paired bootstrap CI" in result.output and (tmp_path / "b" / "compare.html").exists()
    assert compare_runs(tmp_path / "a", tmp_path / "b").delta == compare_records(a, b).delta
    missing = CliRunner().invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "results.jsonl" in missing.output
