"""``verigym eval`` hardening (issue 14): empty answers counted apart, ``--resume`` on a run that never
started, malformed optional response fields that keep the answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hard_fake import Fake
from typer.testing import CliRunner

from verigym.cli import app

runner = CliRunner()


def run_eval(url: str, out: Path, *extra: str) -> tuple[int, str]:
    args = ["eval", "arithmetic", "--base-url", url, "--model", "fake", "-n", "6", "--out", str(out), *extra]
    result = runner.invoke(app, args, env={"COLUMNS": "200"})
    return result.exit_code, result.output


def records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines() if x.strip()]


def test_empty_answers_are_wrong_answers_counted_apart(tmp_path: Path) -> None:
    calls = {"n": 0}

    def shape(body: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
        calls["n"] += 1
        choice = payload["choices"][0]
        if calls["n"] % 3 == 1:
            choice["message"]["content"] = ""
        elif calls["n"] % 3 == 2:
            choice["message"]["content"], choice["finish_reason"] = None, "length"
        return payload

    with Fake(shape) as fake:
        code, output = run_eval(fake.url, tmp_path / "run")
    assert code == 0, output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["n_errors"] == 0 and summary["n_scored"] == 6
    assert summary["empty_answers"] == 4
    assert summary["reward_mean"] == 2 / 6
    assert "empty answers" in output


def test_resume_of_a_run_that_never_started_starts_it(tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()  # killed right after creating the folder, before config.json
    with Fake() as fake:
        code, output = run_eval(fake.url, out, "--resume")
        assert code == 0, output
        assert len(records(out)) == 6
        code, output = run_eval(fake.url, out, "--resume")  # and resuming a finished run adds nothing
    assert code == 0, output
    assert len(records(out)) == 6


def test_malformed_usage_and_logprobs_keep_the_answer(tmp_path: Path) -> None:
    def shape(body: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
        payload["usage"] = "lots"
        payload["choices"][0]["logprobs"] = "none today"
        return payload

    with Fake(shape) as fake:
        code, output = run_eval(fake.url, tmp_path / "run")
    assert code == 0, output
    recs = records(tmp_path / "run")
    assert all(r["error"] is None and r["score"]["reward"] == 1.0 for r in recs)
    completion = recs[0]["trajectory"]["turns"][0]["completion"]
    assert completion["malformed"] == ["usage", "choices[0].logprobs"]


def test_eval_with_a_judge_server_closes_its_session(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    with Fake() as fake:
        done = subprocess.run(
            [sys.executable, "-W", "default", "-m", "verigym", "eval", "rubric_writing", "--base-url", fake.url,
             "--model", "fake", "-n", "2", "--out", str(tmp_path / "run"), "--env-arg", f"judge_base_url={fake.url}",
             "--env-arg", "judge_model=fake"],
            capture_output=True, text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "1"},
        )  # fmt: skip
        judged = [b for b in fake.requests if "rubric" in json.dumps(b).lower()]
    assert (tmp_path / "run" / "summary.json").exists(), done.stderr
    assert judged, "the judge was never asked"
    assert "Unclosed client session" not in done.stderr + done.stdout
