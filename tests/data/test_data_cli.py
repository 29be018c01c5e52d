"""`verigym profile`, `synth`, `select-tasks` and `quality` from the CLI against a real local server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "eval"))
from eval_fakeserver import FakeServer

from verigym.cli import app

ENV = str(Path(__file__).resolve().parents[1] / "eval" / "eval_envs.py") + ":AddEnv"
runner = CliRunner()


def test_profile_synth_and_quality(tmp_path: Path) -> None:
    with FakeServer() as srv:  # answers A+B, or A+B+1 when the request's seed is divisible by 5
        prof = runner.invoke(
            app,
            ["profile", ENV, "--base-url", srv.url, "-n", "12", "-k", "5", "--out", str(tmp_path / "prof")],
        )
        synth = runner.invoke(
            app,
            [
                "synth",
                ENV,
                "--teacher",
                "fake-model",
                "--base-url",
                srv.url,
                "-n",
                "12",
                "-k",
                "5",
                "--keep",
                "shortest",
                "--out",
                str(tmp_path / "syn"),
            ],
        )
    assert prof.exit_code == 0, prof.output
    rows = [json.loads(x) for x in (tmp_path / "prof" / "profile.jsonl").read_text().splitlines()]
    assert len(rows) == 12 and all(r["samples"] == 5 for r in rows)
    results = [json.loads(x) for x in (tmp_path / "prof" / "results.jsonl").read_text().splitlines()]
    for row in rows:  # the profile is exactly the per-task share of rewarded samples
        mine = [r["score"]["reward"] for r in results if r["task_id"] == row["task_id"]]
        assert row["pass_rate"] == sum(mine) / len(mine)
    band = json.loads((tmp_path / "prof" / "band.json").read_text())
    assert set(band["task_ids"]) == {r["task_id"] for r in rows if 0 < r["pass_rate"] < 1}

    assert synth.exit_code == 0, synth.output
    sft = [json.loads(x) for x in (tmp_path / "syn" / "sft.jsonl").read_text().splitlines()]
    assert sft and all(line["reward"] == 1.0 for line in sft)  # only verified samples are kept
    assert len({line["task_id"] for line in sft}) == len(sft)  # --keep shortest: one per task
    assert all(line["loss_mask"] == [0, 1] for line in sft)
    stats = json.loads((tmp_path / "syn" / "synth.json").read_text())
    assert stats["samples"] == 60 and 0 < stats["yield"] < 1

    q = runner.invoke(
        app,
        [
            "quality",
            f"a={tmp_path / 'prof'}",
            f"b={tmp_path / 'syn'}",
            "--retest",
            "a",
            "b",
            "--out",
            str(tmp_path / "q"),
        ],
    )
    assert q.exit_code == 0, q.output
    report = json.loads((tmp_path / "q" / "quality.json").read_text())
    assert report["models"] == ["a", "b"] and report["hardness"]["n_tasks"] == 12
    assert "data:image/png;base64" in (tmp_path / "q" / "report.html").read_text()


def test_select_tasks_by_variance_and_bad_input(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    steps = [{"x": 0.0, "y": 0.5}, {"x": 1.0, "y": 0.5, "z": 0.0}, {"z": 0.5}]
    lines = [{"phase": "sft", "step": 0}] + [
        {"phase": "rl", "step": i, "task_pass_rates": rates} for i, rates in enumerate(steps)
    ]
    (run / "metrics.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    res = runner.invoke(app, ["select-tasks", str(run), "--by", "variance", "--top", "2"])
    assert res.exit_code == 0, res.output
    chosen = json.loads((run / "selected_by_variance.json").read_text())
    assert [c["task_id"] for c in chosen] == ["x", "z"]  # variances 0.25, 0.0625, 0
    bad = runner.invoke(app, ["select-tasks", str(tmp_path), "--by", "variance"])
    assert bad.exit_code == 2 and "metrics.jsonl" in bad.output
    (run / "metrics.jsonl").write_text("not json\n")
    bad = runner.invoke(app, ["select-tasks", str(run)])
    assert bad.exit_code == 2 and "metrics.jsonl:1" in bad.output


def test_synth_teacher_oracle_is_the_environments_oracle(tmp_path: Path) -> None:
    out = tmp_path / "oracle"
    done = runner.invoke(
        app, ["synth", "arithmetic", "--teacher", "oracle", "-n", "6", "-k", "1", "--out", str(out)]
    )
    assert done.exit_code == 0, done.output
    sft = [json.loads(x) for x in (out / "sft.jsonl").read_text().splitlines()]
    assert len(sft) == 6 and all(line["reward"] == 1.0 for line in sft)  # the oracle solves every task
    assert json.loads((out / "synth.json").read_text())["yield"] == 1.0
