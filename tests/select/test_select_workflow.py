"""``verigym.select.run_selection`` called as a library, without the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from verigym.envs.registry import load_env
from verigym.policies.spec import ModelSpec
from verigym.select import SelectConfig, SelectEvent, SelectSetupError, run_selection
from verigym.types import Grade, Task, Trajectory


def test_run_selection_samples_measures_and_writes_the_run(tmp_path: Path) -> None:
    env = load_env("arithmetic")
    events: list[SelectEvent] = []
    cfg = SelectConfig(methods=["majority", "best-of-n"], ns=[1, 2], draws=1)

    def correct(task: Task, trajectory: Trajectory) -> Grade:  # best-of-n's grader: the reference
        return Grade(score=float(trajectory.final_text.strip() == task.answer))

    run = run_selection(
        "arithmetic",
        env.oracle_policy(),
        cfg,
        grader=correct,
        num_tasks=3,
        out=tmp_path / "sel",
        on_event=events.append,
    )
    assert run.out == tmp_path / "sel" and len(run.records) == 3 * 2
    assert [r["accuracy"] for r in run.summary["methods"]["majority"]] == [1.0, 1.0]  # the oracle
    assert [r["accuracy"] for r in run.summary["methods"]["best-of-n"]] == [1.0, 1.0]
    assert run.summary["env_args"] == {} and run.summary["deepconf_online_mode"].startswith("replayed: Local")
    start = next(e for e in events if e.kind == "start")
    assert (start.total, start.samples) == (6, 2)
    assert sum(e.kind == "record" for e in events) == 6 and events[-1].kind == "select"
    written = json.loads((tmp_path / "sel" / "summary.json").read_text())
    assert written["format_version"] >= 1 and written["methods"] == run.summary["methods"]
    assert (tmp_path / "sel" / "report.html").exists()
    with pytest.raises(SelectSetupError, match="already holds results; pick another --out"):
        run_selection(
            "arithmetic", env.oracle_policy(), cfg, grader=correct, num_tasks=3, out=tmp_path / "sel"
        )


def test_setup_problems_are_one_line(tmp_path: Path) -> None:
    oracle = load_env("arithmetic").oracle_policy()
    with pytest.raises(SelectSetupError, match="environment 'no-such-env': unknown environment"):
        run_selection("no-such-env", oracle, out=tmp_path / "a")
    with pytest.raises(
        SelectSetupError, match="environment 'arithmetic': arithmetic: size must be an integer"
    ):
        run_selection("arithmetic", oracle, env_args={"size": "many"}, out=tmp_path / "b")
    with pytest.raises(SelectSetupError, match=r"--model .*no/model: cannot load the local model"):
        run_selection("arithmetic", str(tmp_path / "no" / "model"), out=tmp_path / "c")
    best = SelectConfig(methods=["best-of-n"], ns=[1])
    with pytest.raises(SelectSetupError, match="--bon-grader 'nocolon': expected module:attr"):
        run_selection("arithmetic", oracle, best, grader="nocolon", out=tmp_path / "d")
    with pytest.raises(SelectSetupError, match="--bon-grader 'json:nope': cannot import it"):
        run_selection("arithmetic", oracle, best, grader="json:nope", out=tmp_path / "e")
    dead = ModelSpec(model="m", base_url=["http://127.0.0.1:9/v1"])
    with pytest.raises(SelectSetupError, match="--base-url: cannot reach"):
        run_selection("arithmetic", dead, SelectConfig(ns=[1]), num_tasks=1, out=tmp_path / "f")
    assert not (tmp_path / "f" / "results.jsonl").exists()  # nothing sampled before the check
