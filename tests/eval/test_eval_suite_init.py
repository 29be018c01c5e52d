"""Suites write a scorecard (errors as error rows); `verigym init` writes a package that passes check-env."""

from __future__ import annotations

import asyncio
import json
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verigym.cli import app
from verigym.envs.check import check_env
from verigym.envs.registry import load_env
from verigym.eval.config import EvalConfig
from verigym.eval.suites import SUITES, SuiteError, run_suite, suite_members
from verigym.record import read_run


def test_suite_scorecard(tmp_path: Path) -> None:
    base = EvalConfig(env="suite", num_tasks=3, concurrency=4)
    card = asyncio.run(run_suite("arithmetic,search,no_such_env", "oracle", base, out=tmp_path))
    rows = {r["env"]: r for r in card["envs"]}
    assert rows["arithmetic"]["reward_mean"] == 1.0 and rows["search"]["pass_at_k"]["1"] == 1.0
    assert rows["search"]["grader_means"] == {"correct": 1.0}
    assert (
        rows["no_such_env"]["reward_mean"] is None and "unknown environment" in rows["no_such_env"]["error"]
    )
    assert card["n_env_errors"] == 1 and card["mean_reward"] == 1.0
    saved = json.loads((tmp_path / "scorecard.json").read_text())
    assert saved["envs"][0]["env"] == "arithmetic"
    assert (tmp_path / "search" / "results.jsonl").exists()
    suite_run, member = read_run(tmp_path), read_run(tmp_path / "search")  # run records, one a folder
    assert suite_run.kind == "suite" and suite_run.header is not None and suite_run.header.finished_at
    assert suite_run.header.config["suite"] == "arithmetic,search,no_such_env" and member.kind == "eval"
    html = (tmp_path / "scorecard.html").read_text()
    assert "data:image/png;base64" in html and "no_such_env" in html
    null = asyncio.run(run_suite("search", "null", base, out=tmp_path / "null"))
    assert null["envs"][0]["reward_mean"] == 0.0


def test_suite_names() -> None:
    assert [n for n, _ in SUITES["holistic"]] == [
        "arithmetic", "math", "code", "tools", "wordle", "instructions", "json_extract",
        "search", "repo_fix", "rubric_writing",
    ]  # fmt: skip
    with pytest.raises(SuiteError, match="known suites"):
        suite_members("nope")
    bad = CliRunner().invoke(app, ["suite", "nope", "--policy", "oracle"])
    assert bad.exit_code == 2 and "unknown suite" in bad.output


def test_suite_cli_with_oracle(tmp_path: Path) -> None:
    out = tmp_path / "card"
    result = CliRunner().invoke(app, ["suite", "smoke", "--policy", "oracle", "-n", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "rubric_writing" in result.output and (out / "scorecard.html").exists()


def test_init_package_loads_and_passes_check_env(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["init", "word-flip", "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    root = tmp_path / "word-flip"
    meta = tomllib.loads((root / "pyproject.toml").read_text())
    assert meta["project"]["entry-points"]["verigym.plugins"] == {"word-flip": "word_flip.plugin"}
    plugin = (root / "src" / "word_flip" / "plugin.py").read_text()
    assert 'register_env("word-flip", "word_flip.env:WordFlipEnv"' in plugin
    assert (root / "tests" / "test_word_flip_env.py").exists() and "check-env" in (
        root / "README.md"
    ).read_text()
    env = load_env(f"{root / 'src' / 'word_flip' / 'env.py'}:WordFlipEnv", length=5)
    report = check_env(env, n=8)
    assert report.ok, [f"{r.name}: {r.detail}" for r in report.failures]
    again = CliRunner().invoke(app, ["init", "word-flip", "--dir", str(tmp_path)])
    assert again.exit_code == 2 and "not empty" in again.output
    bad = CliRunner().invoke(app, ["init", "Bad Name", "--dir", str(tmp_path)])
    assert bad.exit_code == 2 and "lowercase" in bad.output


def test_a_suite_exits_1_when_a_member_did_not_run_and_0_when_all_did(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "bad"
    bad = runner.invoke(
        app, ["suite", "arithmetic,no_such_env", "--policy", "oracle", "-n", "2", "--out", str(out)]
    )
    assert bad.exit_code == 1, bad.output
    assert "exit 1" in bad.output and "no_such_env" in bad.output and (out / "scorecard.json").exists()
    good = runner.invoke(
        app, ["suite", "arithmetic", "--policy", "oracle", "-n", "2", "--out", str(tmp_path / "ok")]
    )
    assert good.exit_code == 0, good.output
