"""``verigym eval ENV --policy oracle|null``: the environment's own policy through the normal eval.

The same results file, config.json, summary and report as a model run; bad combinations are one
line with exit code 2; a resumed run keeps its policy.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from verigym.cli import app

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "code_benchmarks"  # humaneval rows
runner = CliRunner()


def _summary(out: Path) -> dict[str, object]:
    return dict(json.loads((out / "summary.json").read_text()))


def test_oracle_and_null_run_through_eval_with_all_files(tmp_path: Path) -> None:
    for policy, want in (("oracle", 1.0), ("null", 0.0)):
        out = tmp_path / policy
        res = runner.invoke(app, ["eval", "arithmetic", "--policy", policy, "-n", "6", "--out", str(out)])
        assert res.exit_code == 0, res.output
        assert {p.name for p in out.iterdir()} >= {
            "results.jsonl",
            "config.json",
            "summary.json",
            "report.html",
        }
        summary = _summary(out)
        assert summary["n_scored"] == 6 and summary["reward_mean"] == want
        saved = json.loads((out / "config.json").read_text())
        assert saved["config"]["policy"] == policy and saved["policy"].startswith(f"arithmetic-{policy}")


def test_humaneval_oracle_passes_every_fixture_task_and_null_none(tmp_path: Path) -> None:
    data = str(HERE / "humaneval_fixture.jsonl.gz")
    for policy, want in (("oracle", 1.0), ("null", 0.0)):
        out = tmp_path / policy
        args = ["eval", "humaneval", "--env-arg", f"path={data}", "--policy", policy, "--out", str(out)]
        res = runner.invoke(app, [*args, "-n", "3"])
        assert res.exit_code == 0, res.output
        summary = _summary(out)
        assert summary["n_samples"] == summary["n_scored"] == 3 and summary["reward_mean"] == want


def test_bad_policy_combinations_are_one_line_exit_2(tmp_path: Path) -> None:
    out = str(tmp_path / "x")
    cases = [
        (["--policy", "gold"], "'gold' is not a policy"),
        (["--policy", "oracle", "--model", "m"], "drop --model"),
        (["--policy", "oracle", "--base-url", "http://127.0.0.1:9/v1"], "drop --base-url"),
    ]
    for extra, said in cases:
        res = runner.invoke(app, ["eval", "arithmetic", "-n", "2", "--out", out, *extra])
        assert res.exit_code == 2, res.output
        assert said in res.output and "Traceback" not in res.output
    # an environment whose oracle_policy() is None
    env_file = tmp_path / "no_oracle.py"
    env_file.write_text(
        "from verigym.envs.builtin.arithmetic import ArithmeticEnv\n"
        "class NoOracle(ArithmeticEnv):\n"
        "    def oracle_policy(self):\n"
        "        return None\n"
    )
    res = runner.invoke(app, ["eval", f"{env_file}:NoOracle", "--policy", "oracle", "-n", "2", "--out", out])
    assert res.exit_code == 2 and "has no oracle policy" in res.output, res.output


def test_resume_keeps_the_policy_and_refuses_another(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert (
        runner.invoke(
            app, ["eval", "arithmetic", "--policy", "oracle", "-n", "3", "--out", str(out)]
        ).exit_code
        == 0
    )
    res = runner.invoke(app, ["eval", "--out", str(out), "--resume", "-n", "5"])
    assert res.exit_code == 0, res.output
    summary = _summary(out)
    assert summary["n_scored"] == 5 and summary["reward_mean"] == 1.0
    res = runner.invoke(app, ["eval", "--out", str(out), "--resume", "--policy", "null"])
    assert res.exit_code == 2 and "policy was 'oracle'" in res.output, res.output
