"""Malformed input across every CLI command and config file: each case must exit 2 with one line that
names what was wrong and where (a file, a line, a flag), and never print a traceback (issue 14).

The cases run in-process through the real Typer app (``typer.testing.CliRunner``), which goes through
the same top-level error handling as the ``verigym`` script; two cases also run the script itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verigym.cli import app

Case = Callable[[Path], tuple[list[str], list[str]]]
runner = CliRunner()


def _binary(tmp: Path, name: str = "bin.toml") -> Path:
    path = tmp / name
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe binary")
    return path


def _write(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.write_text(text, encoding="utf-8")
    return path


def _latin1(tmp: Path) -> Path:
    path = tmp / "latin1.jsonl"
    good = json.dumps({"question": "What is 1+1?", "answer": "2\n#### 2"})
    path.write_bytes(
        good.encode() + b"\n" + '{"question": "caf\u00e9?", "answer": "#### 1"}'.encode("latin-1") + b"\n"
    )
    return path


def _null_question(tmp: Path) -> Path:
    return _write(tmp, "nullq.jsonl", json.dumps({"question": None, "answer": "#### 2"}) + "\n")


def _out(tmp: Path) -> list[str]:
    return ["--out", str(tmp / "run")]


CASES: dict[str, Case] = {
    # config files: train, sft, eval --config
    "train-binary-config": lambda t: (["train", str(_binary(t))], ["bin.toml", "UTF-8"]),
    "sft-binary-config": lambda t: (["sft", str(_binary(t))], ["bin.toml", "UTF-8"]),
    "eval-binary-config": lambda t: (
        ["eval", "arithmetic", "--config", str(_binary(t))],
        ["bin.toml", "UTF-8"],
    ),
    "train-missing-config": lambda t: (["train", str(t / "nope.toml")], ["nope.toml", "no such file"]),
    "train-directory-config": lambda t: (["train", str(t)], [str(t), "is a directory"]),
    "eval-directory-config": lambda t: (["eval", "arithmetic", "--config", str(t)], ["is a directory"]),
    "train-bad-toml": lambda t: (["train", str(_write(t, "b.toml", "[rl\nsteps = "))], ["b.toml", "TOML"]),
    "train-unknown-key": lambda t: (
        ["train", str(_write(t, "u.toml", "[rl]\nstepz = 3\n"))],
        ["rl.stepz", "unknown key"],
    ),
    "train-wrong-type": lambda t: (["train", str(_write(t, "w.toml", '[rl]\nlr = "fast"\n'))], ["rl.lr"]),
    "sft-wrong-type": lambda t: (["sft", str(_write(t, "s.toml", "[sft]\nepochs = -1\n"))], ["sft.epochs"]),
    "train-wandb-missing": lambda t: (
        ["train", str(_write(t, "wb.toml", "[logging]\nwandb = true\n"))],
        ["logging.wandb", "not installed"],
    ),
    "train-tensorboard-missing": lambda t: (
        ["train", str(_write(t, "tb.toml", "[logging]\ntensorboard = true\n"))],
        ["logging.tensorboard", "not installed"],
    ),
    "train-set-no-equals": lambda t: (
        ["train", str(_write(t, "ok.toml", "")), "--set", "rl.lr"],
        ["--set", "key=value"],
    ),
    "train-unknown-preset": lambda t: (
        ["train", str(_write(t, "ok.toml", "")), "--preset", "nope"],
        ["rl.preset", "nope"],
    ),
    "train-resume-corrupt-config": lambda t: (
        ["train", "--resume", str(_binary(t, "train_config.json").parent)],
        ["--resume", "train_config.json"],
    ),
    "train-resume-wrong-config": lambda t: (
        ["train", "--resume", str(_write(t, "train_config.json", '{"rl": {"lr": "x"}}').parent)],
        ["train_config.json", "rl.lr"],
    ),
    "train-resume-missing": lambda t: (["train", "--resume", str(t / "norun")], ["--resume", "norun"]),
    "eval-config-unknown-key": lambda t: (
        ["eval", "arithmetic", "--config", str(_write(t, "e.toml", "bogus = 1\n"))],
        ["e.toml", "bogus"],
    ),
    "eval-config-bad-value": lambda t: (
        ["eval", "arithmetic", "--config", str(_write(t, "v.toml", "num_tasks = 0\n"))],
        ["v.toml", "num_tasks"],
    ),
    # flags
    "eval-n-not-int": lambda t: (["eval", "arithmetic", "-n", "ten"], ["-n", "ten"]),
    "eval-temperature-not-float": lambda t: (
        ["eval", "arithmetic", "--temperature", "hot"],
        ["--temperature"],
    ),
    "eval-unknown-flag": lambda t: (["eval", "arithmetic", "--no-such-flag"], ["--no-such-flag"]),
    "unknown-command": lambda t: (["evaluate"], ["evaluate"]),
    "eval-k-zero": lambda t: (["eval", "arithmetic", "-k", "0", *_out(t)], ["--samples-per-task"]),
    "eval-max-tokens-negative": lambda t: (
        ["eval", "arithmetic", "--max-tokens", "-5", *_out(t)],
        ["--max-tokens"],
    ),
    "eval-base-url-not-url": lambda t: (
        ["eval", "arithmetic", "--base-url", "notaurl", "-n", "1", *_out(t)],
        ["--base-url", "notaurl", "not a URL"],
    ),
    "eval-model-missing-dir": lambda t: (
        ["eval", "arithmetic", "--model", "/nonexistent/dir", "-n", "1", *_out(t)],
        ["/nonexistent/dir", "no such directory"],
    ),
    "eval-unknown-env": lambda t: (["eval", "no_such_env", *_out(t)], ["no_such_env"]),
    "eval-env-arg-no-equals": lambda t: (
        ["eval", "arithmetic", "--env-arg", "level", *_out(t)],
        ["--env-arg", "key=value"],
    ),
    "eval-env-arg-out-of-range": lambda t: (
        ["eval", "arithmetic", "--env-arg", "level=99", "-n", "1", *_out(t)],
        ["level"],
    ),
    "eval-resume-without-out": lambda t: (["eval", "arithmetic", "--resume"], ["--resume", "--out"]),
    # datasets through --env-arg path=
    "math-path-not-utf8": lambda t: (
        ["eval", "math", "--env-arg", f"path={_latin1(t)}", "-n", "1", *_out(t)],
        ["latin1.jsonl:2", "UTF-8"],
    ),
    "math-path-directory": lambda t: (
        ["eval", "math", "--env-arg", f"path={t}", "-n", "1", *_out(t)],
        [str(t), "is a directory"],
    ),
    "math-path-null-question": lambda t: (
        ["eval", "math", "--env-arg", f"path={_null_question(t)}", "-n", "1", *_out(t)],
        ["nullq.jsonl:1", "'question' is null"],
    ),
    "math-path-bad-json": lambda t: (
        ["eval", "math", "--env-arg", f"path={_write(t, 'j.jsonl', '{nope')}", "-n", "1", *_out(t)],
        ["j.jsonl:1", "invalid JSON"],
    ),
    "math-path-missing": lambda t: (
        ["eval", "math", "--env-arg", f"path={t / 'gone.jsonl'}", "-n", "1", *_out(t)],
        ["gone.jsonl", "no such file"],
    ),
    # serve
    "serve-missing-dir": lambda t: (["serve", "/nonexistent/dir"], ["/nonexistent/dir", "no such directory"]),
    "serve-bad-port": lambda t: (["serve", "tiny", "--port", "70000"], ["--port"]),
    "serve-port-not-int": lambda t: (["serve", "tiny", "--port", "http"], ["--port", "http"]),
    "serve-bad-lora": lambda t: (["serve", "tiny", "--port", "1", "--threads", "0"], ["--"]),
    # other commands
    "check-env-unknown": lambda t: (["check-env", "no_such_env"], ["no_such_env"]),
    "verifier-bench-missing-suite": lambda t: (
        ["verifier-bench", "--grader", "math", "--suite", str(t / "s.jsonl")],
        ["s.jsonl"],
    ),
    "verifier-bench-binary-suite": lambda t: (
        ["verifier-bench", "--grader", "math", "--suite", str(_binary(t, "s.jsonl"))],
        ["s.jsonl"],
    ),
    "verifier-bench-unknown-grader": lambda t: (
        ["verifier-bench", "--grader", "nope", "--suite", str(_write(t, "s.jsonl", ""))],
        ["nope"],
    ),
    "select-unknown-method": lambda t: (["select", "arithmetic", "--method", "nope", *_out(t)], ["nope"]),
    "compare-missing-runs": lambda t: (["compare", str(t / "a"), str(t / "b")], [str(t / "a")]),
    "quality-missing-run": lambda t: (
        ["quality", str(t / "a"), str(t / "b"), "--out", str(t / "q")],
        [str(t / "a")],
    ),
    "select-tasks-missing-run": lambda t: (["select-tasks", str(t / "r")], [str(t / "r")]),
    "suite-unknown": lambda t: (["suite", "nope", "--out", str(t / "s")], ["nope"]),
    "profile-n-not-int": lambda t: (["profile", "arithmetic", "-n", "zero"], ["-n", "zero"]),
    "synth-teacher-missing-dir": lambda t: (
        ["synth", "arithmetic", "--teacher", "/nonexistent/t", "-n", "1", *_out(t)],
        ["/nonexistent/t", "no such directory"],
    ),
    "init-bad-name": lambda t: (["init", "Bad Name!"], ["Bad Name!"]),
    "quickstart-steps-not-int": lambda t: (["quickstart", "--steps", "x"], ["--steps", "x"]),
    "envs-unknown-flag": lambda t: (["envs", "--bogus"], ["--bogus"]),
    "models-create-unknown-size": lambda t: (["models", "create", "huge", "--out", str(t / "m")], ["huge"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_malformed_input_is_one_line_exit_2(name: str, tmp_path: Path) -> None:
    args, needles = CASES[name](tmp_path)
    result = runner.invoke(app, args, env={"COLUMNS": "200", "VERIGYM_HOME": str(tmp_path / "home")})
    err = result.stderr.strip()
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert "Traceback" not in result.output
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error:"), err
    for needle in needles:
        assert needle in err, (needle, err)


def test_the_script_itself_prints_one_line_for_a_usage_error(tmp_path: Path) -> None:
    for args in (["eval", "arithmetic", "-n", "ten"], ["train", str(_binary(tmp_path))]):
        done = subprocess.run(
            [sys.executable, "-m", "verigym", *args], capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 2, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr


def test_cases_cover_thirty_inputs() -> None:
    assert len(CASES) >= 30
