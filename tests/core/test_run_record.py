"""The run record (``verigym.record``): headers and summaries round-trip, runs written before the
record was versioned still read (``tests/fixtures/run_record``), a newer ``format_version`` is refused
in one line by every reader, and the one fold gives eval, train and select the numbers each
computed on its own before."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from verigym._pass_at_k import pass_table
from verigym.eval.compare import compare_runs
from verigym.eval.run import check_resumable
from verigym.record import (
    FORMAT_VERSION,
    EvalSummary,
    RunFormatError,
    SelectSummary,
    TrainSummary,
    fold,
    new_header,
    read_header,
    read_run,
    summarize,
    with_header,
    write_header,
)
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

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "run_record"


def _record(
    task: str, index: int, reward: float | None, *, error: str | None = None, graded: bool = True
) -> Record:
    grades = {"correct": Grade(score=reward or 0.0)} if reward is not None else {}
    if not graded:
        grades = {"correct": Grade.failed("judge timed out")}
    turn = Turn(
        source="model",
        messages=[Message(role="assistant", content=str(reward))],
        completion=Completion(text=str(reward), usage=Usage(prompt_tokens=3, completion_tokens=2)),
    )
    trajectory = Trajectory(
        task_id=task, sample_index=index, prompt=[Message(role="user", content="q")], turns=[turn]
    )
    return Record(
        env="e",
        model="m",
        task_id=task,
        sample_index=index,
        sampling=Sampling(),
        wall_s=0.0,
        trajectory=trajectory,
        score=Score(reward=reward, grades=grades, error=None if graded else "correct: judge timed out"),
        usage=Usage(prompt_tokens=3, completion_tokens=2),
        error=ErrorInfo(kind=error, message=f"{error} happened") if error else None,
    )


def _records() -> list[Record]:
    """Three tasks, three samples each: wrong, right, partial, a server error, a grading failure."""
    return [
        _record("t0", 0, 1.0),
        _record("t0", 1, 0.0),
        _record("t0", 2, None, error="server"),
        _record("t1", 0, None, graded=False),
        _record("t1", 1, 1.0),
        _record("t1", 2, 1.0),
        _record("t2", 0, 0.5),
        _record("t2", 1, 0.0),
        _record("t2", 2, None, error="timeout"),
    ]


# ---- round trip -------------------------------------------------------------------------------------


def test_header_and_summary_round_trip(tmp_path: Path) -> None:
    header = new_header("eval", {"env": "e", "num_tasks": 3}, seeds={"seed": 7}, revision=False)
    assert header.format_version == FORMAT_VERSION and header.started_at and header.finished_at is None
    assert "python" in header.versions and "pydantic" in header.versions
    write_header(tmp_path, header)
    assert read_header(tmp_path) == header
    summary = summarize(_records(), samples_per_task=3, wall_s=1.5)
    ended = header.finished(1.5)
    (tmp_path / "summary.json").write_text(json.dumps(with_header(summary, ended)))
    write_header(tmp_path, ended)
    run = read_run(tmp_path / "summary.json")  # a file of the folder reads the folder
    assert run.kind == "eval" and run.format_version == FORMAT_VERSION and run.finished
    assert run.header == ended and run.header.wall_s == 1.5
    assert isinstance(run.summary, EvalSummary)
    named = run.summary.model_dump(
        exclude={"format_version", "run", "non_finite", "env_args", "env_args_from"}
    )
    assert {k: v for k, v in named.items() if k in summary} == {k: summary[k] for k in named if k in summary}
    assert run.summary.pass_at_k == summary["pass_at_k"] and run.summary.n_errors == 3


def test_a_running_run_reads_from_its_header_alone(tmp_path: Path) -> None:
    write_header(tmp_path, new_header("train", {"seed": 1}, revision=False))
    (tmp_path / "metrics.jsonl").write_text('{"step": 0, "loss": 1.0}\n{"step": 1, "lo')  # torn tail
    run = read_run(tmp_path)
    assert run.kind == "train" and not run.finished and run.header is not None
    assert run.metrics() == [{"step": 0, "loss": 1.0}]


# ---- old runs -----------------------------------------------------------------------------------------


def test_unversioned_runs_of_every_kind_still_read() -> None:
    eval_run = read_run(FIXTURES / "eval_v0")
    assert (eval_run.kind, eval_run.format_version, eval_run.header) == ("eval", 0, None)
    assert isinstance(eval_run.summary, EvalSummary)
    assert eval_run.summary.pass_at_k == {"1": 0.3333333333333333, "2": 0.6190476190476191}
    assert eval_run.summary.errors_by_kind == {"bad_request": 3} and eval_run.results_file is not None

    train_run = read_run(FIXTURES / "train_v0")
    assert (train_run.kind, train_run.format_version) == ("train", 0)
    assert isinstance(train_run.summary, TrainSummary)
    assert train_run.summary.pass_at_1_after_rl == 0.45 and train_run.summary.steps == 3
    assert train_run.summary.extra()["eval/arithmetic/grader/correct"] == 0.45
    assert [r["phase"] for r in train_run.metrics()] == ["sft", "rl", "rl"]

    select_run = read_run(FIXTURES / "select_v0")
    assert (select_run.kind, select_run.format_version) == ("select", 0)
    assert isinstance(select_run.summary, SelectSummary)
    assert set(select_run.summary.methods) == {"majority"} and select_run.summary.ns == [1, 2]


def test_a_folder_that_is_no_run_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(RunFormatError, match=r"not a verigym run folder") as info:
        read_run(tmp_path)
    assert "\n" not in str(info.value)
    (tmp_path / "summary.json").write_text('{"n_samples": "many"}')
    with pytest.raises(RunFormatError, match=r"summary.json: n_samples: ") as info:
        read_run(tmp_path)
    assert "\n" not in str(info.value)


# ---- newer formats are refused ---------------------------------------------------------------------------


def _newer(folder: Path, where: str) -> Path:
    """An eval run folder written by a future verigym (format_version + 1 in ``where``)."""
    folder.mkdir()
    (folder / "results.jsonl").write_text((FIXTURES / "eval_v0" / "results.jsonl").read_text())
    header = new_header("eval", revision=False).model_dump(mode="json")
    if where == "run.json":
        (folder / "run.json").write_text(json.dumps({**header, "format_version": FORMAT_VERSION + 1}))
    else:
        summary = json.loads((FIXTURES / "eval_v0" / "summary.json").read_text())
        (folder / "summary.json").write_text(json.dumps({**summary, "format_version": FORMAT_VERSION + 1}))
    return folder / where


@pytest.mark.parametrize("where", ["run.json", "summary.json"])
def test_a_newer_format_is_refused_in_one_line_by_every_reader(tmp_path: Path, where: str) -> None:
    from verigym.eval.config import ConfigError

    file = _newer(tmp_path / "future", where)
    wanted = (
        f"{file}: format_version {FORMAT_VERSION + 1} is newer than this verigym reads ({FORMAT_VERSION})"
    )
    with pytest.raises(RunFormatError) as info:
        read_run(tmp_path / "future")
    assert str(info.value).startswith(wanted) and "\n" not in str(info.value)
    with pytest.raises(RunFormatError, match="is newer than"):  # compare
        compare_runs(FIXTURES / "eval_v0", tmp_path / "future")
    with pytest.raises(ConfigError, match=r"--resume: .*is newer than"):  # eval --resume
        check_resumable(tmp_path / "future")


def test_not_a_version_is_refused(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps({"format_version": "one", "kind": "eval"}))
    with pytest.raises(RunFormatError, match=r"run.json: format_version 'one' is not a run-record version"):
        read_run(tmp_path)


def test_the_cli_readers_refuse_a_newer_run_in_one_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from verigym.cli import app

    _newer(tmp_path / "future", "run.json")
    for args in (
        ["compare", str(FIXTURES / "eval_v0"), str(tmp_path / "future")],
        [
            "quality",
            f"a={FIXTURES / 'eval_v0'}",
            f"b={tmp_path / 'future'}",
            "--out",
            str(tmp_path / "q"),
        ],
    ):
        result = CliRunner().invoke(app, args)
        assert result.exit_code != 0, args
        text = result.output.strip()
        assert "is newer than this verigym reads" in text and "Traceback" not in text, (args, text)


# ---- one fold for eval, train and select -----------------------------------------------------------------


def _old_train(records: list[Record], names: list[str]) -> dict[str, object]:
    """``train._model.evaluate``'s numbers as it computed them before the fold was shared."""
    ok = [r for r in records if r.error is None and r.score.reward is not None]
    rewards = [float(r.score.reward) for r in ok if r.score.reward is not None]
    task_of: dict[str, int] = {}
    task_index = np.asarray([task_of.setdefault(r.task_id, len(task_of)) for r in ok], dtype=np.int64)
    out: dict[str, object] = {
        "pass_at_1": pass_table(np.asarray(rewards) >= 1.0, task_index, 1)["1"],
        "reward": sum(rewards) / len(rewards) if rewards else None,
        "errors": float(len(records) - len(ok)),
        "samples": float(len(records)),
    }
    first = next((r.error for r in records if r.error is not None), None)
    if len(ok) < len(records):
        out["first_error"] = f"{first.kind}: {first.message}" if first is not None else "no reward"
    for name in names:
        scores = [r.score.grades[name].score for r in ok if name in r.score.grades]
        out[f"grader/{name}"] = sum(scores) / max(len(scores), 1)
    return out


def test_one_fold_gives_eval_train_and_select_their_numbers() -> None:
    records = _records()
    # eval: the summary's numbers, by hand
    summary = summarize(records, samples_per_task=3)
    assert (summary["n_samples"], summary["n_scored"], summary["n_errors"]) == (9, 6, 3)
    assert summary["errors_by_kind"] == {"grader": 1, "server": 1, "timeout": 1}
    assert summary["reward_mean"] == pytest.approx(3.5 / 6)
    assert summary["pass_at_k"]["1"] == pytest.approx((1 / 2 + 2 / 2 + 0 / 2) / 3)
    assert summary["pass_at_k"]["2"] == pytest.approx((1 + 1 + 0) / 3)
    assert summary["pass_at_k"]["3"] is None  # no task has three scored samples
    # train: exactly the old held-out numbers
    folded = fold(records, samples_per_task=3).headline()
    old = _old_train(records, ["correct"])
    new = {
        "pass_at_1": folded["pass_at_1"],
        "reward": folded["reward_mean"],
        "errors": float(folded["n_errors"]),
        "samples": float(folded["n_samples"]),
        "first_error": folded["first_error"],
        "grader/correct": folded["grader_means"]["correct"],
    }
    assert new == old and new["pass_at_1"] == summary["pass_at_k"]["1"]
    # select: the old error count and first error
    aggregate = fold(records, samples_per_task=3)
    old_errors = sum(r.error is not None or r.score.reward is None for r in records)
    assert aggregate.n_samples - aggregate.n_scored == old_errors == 3
    assert aggregate.first_unscored == "server: server happened"
    assert fold(records[3:]).first_unscored == "grader: correct: judge timed out"  # was "no reward"


def test_nothing_scored_is_none_everywhere() -> None:
    records = [_record("t0", 0, None, error="server"), _record("t1", 0, None, error="server")]
    summary = summarize(records)
    assert summary["pass_at_k"] == {"1": None} and summary["reward_mean"] is None
    headline = fold(records).headline()
    assert headline["pass_at_1"] is None and headline["reward_mean"] is None
    assert headline["first_error"] == "server: server happened" and headline["n_errors"] == 2
    assert summary["n_errors"] == 2 and summary["reward_ci95"] is None
