"""Penalties from the command line and configs: `verigym eval --penalty` and `[[rubric.penalties]]`
(a cheat judge given by base URL included) on an environment that has none, reported per detector;
`[[rubric.penalties]]` in a train config reaches every environment and RL metrics."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from agentic_judge_server import start_judge
from typer.testing import CliRunner

from verigym.cli import app
from verigym.train.config import ConfigError, load_config
from verigym.train.rl import load_envs

HERE = Path(__file__).resolve().parent
ENV = f"{HERE / 'agentic_envs.py'}:OnePlusTwo"
runner = CliRunner()


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    proc, url = start_judge(marker="Answer: 4")  # the judge calls a reply with 'Answer: 4' cheating
    yield url
    proc.terminate()
    proc.wait(timeout=10)


def _eval(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["eval", ENV, "-n", "3", *args])
    return result.exit_code, result.output


def _summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


def test_penalty_flag_fires_only_on_hedging(server: str, tmp_path: Path) -> None:
    for model, fired, reward in (("hedger", 1.0, 0.0), ("honest", 0.0, 1.0)):
        out = tmp_path / model
        code, text = _eval(
            "--base-url", server, "--model", model, "--penalty", "hedged_answer", "--out", str(out)
        )
        assert code == 0, text
        s = _summary(out)
        assert s["penalties"]["hedged_answer"] == {
            "judged": 3,
            "fired": int(3 * fired),
            "errors": 0,
            "rate": fired,
        }
        assert s["reward_mean"] == reward  # says_three is 1 either way; hedging costs 1
        assert s["grader_means"]["says_three"] == 1.0
    code, text = _eval("--base-url", server, "--model", "honest", "--out", str(tmp_path / "none"))
    assert (
        code == 0
        and "penalties" in _summary(tmp_path / "none")
        and not _summary(tmp_path / "none")["penalties"]
    )


def test_config_table_with_a_cheat_judge_by_base_url(server: str, tmp_path: Path) -> None:
    config = tmp_path / "eval.toml"
    config.write_text(
        f'base_url = "{server}"\nmodel = "hedger"\n'
        '[[rubric.penalties]]\ndetector = "copied_answer"\namount = 0.5\n'
        f'[[rubric.penalties]]\ndetector = "cheat_judge"\nbase_url = "{server}"\nmodel = "judge"\namount = 2.0\n'
    )
    code, text = _eval(
        "--config", str(config), "--penalty", "hedged_answer=0.25", "--out", str(tmp_path / "r")
    )
    assert code == 0, text
    s = _summary(tmp_path / "r")
    assert s["penalties"]["cheat_judge"]["rate"] == 1.0 and s["penalties"]["hedged_answer"]["rate"] == 1.0
    assert s["penalties"]["copied_answer"]["rate"] == 0.0
    assert s["reward_mean"] == pytest.approx(1.0 - 2.0 - 0.25) and s["penalty_mean"] == pytest.approx(2.25)
    saved = json.loads((tmp_path / "r" / "config.json").read_text())["config"]["rubric"]["penalties"]
    assert [p["detector"] for p in saved] == ["copied_answer", "cheat_judge", "hedged_answer"]


def test_judge_down_is_masked_not_scored(tmp_path: Path, server: str) -> None:
    config = tmp_path / "eval.toml"
    config.write_text(
        '[[rubric.penalties]]\ndetector = "cheat_judge"\nbase_url = "http://127.0.0.1:9/v1"\ntimeout = 5\n'
    )
    code, text = _eval(
        "--base-url", server, "--model", "hedger", "--config", str(config), "--out", str(tmp_path / "d")
    )
    assert code == 0, text
    s = _summary(tmp_path / "d")
    assert s["penalties"]["cheat_judge"] == {"judged": 0, "fired": 0, "errors": 3, "rate": None}
    assert s["reward_mean"] == 1.0  # an unreachable judge neither rewards nor penalises


def test_bad_penalties_are_one_line_exit_2(tmp_path: Path) -> None:
    cases = {
        "unknown detector 'nope'": ["--penalty", "nope"],
        "must be a number": ["--penalty", "hedged_answer=lots"],
        "cheat_judge needs base_url": ["--penalty", "cheat_judge"],
    }
    for needle, args in cases.items():
        code, text = _eval("--base-url", "http://127.0.0.1:9/v1", *args)
        assert code == 2 and needle in text and "Traceback" not in text, text
    bad = tmp_path / "bad.toml"
    bad.write_text('[[rubric.penalties]]\ndetector = "cheat_judge"\n')
    code, text = _eval("--base-url", "http://127.0.0.1:9/v1", "--config", str(bad))
    assert code == 2 and "cheat_judge needs base_url" in text, text


def test_train_config_adds_penalties_to_every_env(tmp_path: Path) -> None:
    config = tmp_path / "train.toml"
    config.write_text(
        '[[envs]]\nname = "arithmetic"\n[[envs]]\nname = "repo_fix"\n'
        '[[rubric.penalties]]\ndetector = "hedged_answer"\namount = 3.0\n'
        '[[rubric.penalties]]\ndetector = "network_attempts"\n'
    )
    envs = dict(load_envs(load_config(config)))
    arith = [(p.grader.name, p.amount) for p in envs["arithmetic"].rubric.all_penalties]
    assert arith == [("hedged_answer", 3.0), ("network_attempts", 1.0)]
    assert [p.grader.name for p in envs["repo_fix"].rubric.all_penalties] == [
        "hacking",
        "hedged_answer",
        "network_attempts",
    ]
    config.write_text('[[rubric.penalties]]\ndetector = "hedging"\n')
    with pytest.raises(ConfigError, match=r"rubric\.penalties\.0\.detector"):
        load_config(config)


@pytest.mark.slow
def test_rl_metrics_report_each_detector(tmp_path: Path) -> None:
    """A short real RL run: metrics.jsonl has penalty/NAME per step."""
    config = tmp_path / "train.toml"
    config.write_text(
        f'out_dir = "{tmp_path / "run"}"\n[model]\ntiny = "tiny"\n[[envs]]\nname = "arithmetic"\n'
        "[rl]\nsteps = 1\ngroups_per_step = 2\ngroup_size = 2\n[eval]\ntasks = 2\n[logging]\nreport = false\n"
        '[[rubric.penalties]]\ndetector = "hedged_answer"\n[[rubric.penalties]]\ndetector = "copied_answer"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "verigym", "train", str(config)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rows = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    step = next(r for r in rows if "penalty/hedged_answer" in r)
    assert 0.0 <= step["penalty/hedged_answer"] <= 1.0 and 0.0 <= step["penalty/copied_answer"] <= 1.0
    assert "penalty" in step


def test_suite_refuses_penalty_and_mcp() -> None:
    result = runner.invoke(app, ["eval", "--suite", "holistic", "--penalty", "hedged_answer"])
    assert result.exit_code == 2 and "not to --suite" in result.output, result.output
