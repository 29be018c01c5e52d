"""`verigym eval` end to end: the four files, kill -9 + --resume, Ctrl-C, faults, bad input."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from eval_fakeserver import FakeServer
from typer.testing import CliRunner

from verigym.cli import app
from verigym.eval.store import load_records

ENV = str(Path(__file__).with_name("eval_envs.py")) + ":AddEnv"
runner = CliRunner()


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["eval", *args])
    return result.exit_code, result.output  # stdout and stderr, interleaved


def default_sigint() -> None:
    """In the child: Ctrl-C as a terminal gives it, even when the test runs in the background (a shell
    starts background jobs with SIGINT ignored, and Python then never raises KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "verigym", "eval", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        preexec_fn=default_sigint,
    )


def wait_for_lines(path: Path, n: int, proc: subprocess.Popen[str], limit: float = 60) -> None:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if path.exists() and path.read_bytes().count(b"\n") >= n:
            return
        assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
        time.sleep(0.005)
    raise AssertionError(f"{path} never reached {n} lines")


def comparable(summary: dict[str, object]) -> dict[str, object]:
    """The numbers of a summary: not its wall time, nor its run header (which invocation wrote it)."""
    return {k: v for k, v in summary.items() if k not in ("wall_s", "run")}


def test_eval_writes_its_five_files_and_passes_env_args(tmp_path: Path) -> None:
    with FakeServer() as srv:
        code, out = cli(
            ENV,
            "--base-url",
            srv.url,
            "-n",
            "6",
            "-k",
            "2",
            "--seed",
            "3",
            "--out",
            str(tmp_path / "a"),
            "--temperature",
            "0.5",
            "--max-tokens",
            "64",
            "--harness",
            "plain",
            "--tool-variant",
            "7",
            "--env-arg",
            "group=true",
        )
    assert code == 0, out
    run = tmp_path / "a"
    assert sorted(p.name for p in run.iterdir()) == [
        "config.json",
        "report.html",
        "results.jsonl",
        "run.json",
        "summary.json",
    ]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["n_samples"] == 12 and summary["n_errors"] == 0 and set(summary["pass_at_k"]) == {"1", "2"}
    config = json.loads((run / "config.json").read_text())
    assert config["config"]["env_args"] == {"group": True, "harness": "plain", "tool_variant": 7}
    assert config["config"]["model"] == "fake-model"  # taken from the server's /models
    assert "openai" in config["versions"] and "git_revision" in config
    assert all(b["temperature"] == 0.5 and b["max_tokens"] == 64 for b in srv.requests)
    report = (run / "report.html").read_text()
    assert report.count("<svg ") == 3 and "<details>" in report and "grade correct" in report
    assert 'aria-label="pass@k"' in report and "<td>mean reward, 95% CI (bootstrap over tasks)</td>" in report
    assert 'aria-label="reward of 12 scored samples"' in report and 'aria-label="mean grade' in report
    assert "pass@2" in out and "reward mean" in out


def test_faults_end_as_scores_or_errors_with_reasons(tmp_path: Path) -> None:
    from eval_envs import AddEnv

    tasks = AddEnv().tasks(12, seed=0)
    faults = ["500!", "500", "429", "slow!", "trunc", "badargs!", "400!", None, None, "slow", "empty", None]
    by_prompt = {t.prompt[0].content: f for t, f in zip(tasks, faults, strict=True)}

    def plan(body: dict[str, object], attempt: int) -> str | None:
        fault = by_prompt[body["messages"][-1]["content"]]  # type: ignore[index]
        if fault is None:
            return None
        return fault.rstrip("!") if fault.endswith("!") or attempt == 0 else None

    toml = tmp_path / "c.toml"
    # a slow answer (30 s) is far past the 1 s timeout, which every other answer (ms) is far inside
    toml.write_text("timeout = 1.0\nmax_retries = 2\nconcurrency = 8\n")
    with FakeServer(plan, slow_s=30, retry_after="0.1") as srv:
        code, out = cli(
            ENV,
            "--base-url",
            srv.url,
            "--model",
            "m",
            "-n",
            "12",
            "-k",
            "2",
            "--out",
            str(tmp_path / "f"),
            "--config",
            str(toml),
        )
    assert code == 1, out  # 6 samples errored: not a success (any errored sample, by default)
    assert "6 of 24 samples errored" in out and "server: 2 samples, e.g. " in out, out
    records = {(r.task_id, r.sample_index): r for r in load_records(tmp_path / "f" / "results.jsonl")}
    assert len(records) == 24
    for i, fault in enumerate(faults):
        for k in range(2):
            r = records[(f"add-0-{i}", k)]
            if fault in ("500!", "slow!", "400!"):
                assert r.error is not None and r.score.reward is None, (fault, r.error)
                assert r.error.kind == {"500!": "server", "slow!": "timeout", "400!": "bad_request"}[fault]
                assert r.error.message
            else:
                assert r.error is None and r.score.reward is not None, (fault, r.error)
    assert records[("add-0-5", 0)].score.reward == 0.0  # bad tool-call JSON is the model's mistake
    summary = json.loads((tmp_path / "f" / "summary.json").read_text())
    assert summary["n_errors"] == 6 and summary["errors_by_kind"] == {
        "bad_request": 2,
        "server": 2,
        "timeout": 2,
    }
    scored = [r.score.reward for r in records.values() if r.error is None]
    assert summary["reward_mean"] == pytest.approx(sum(scored) / len(scored))  # type: ignore[arg-type]


def test_errored_samples_exit_1_at_the_threshold_with_every_file_written(tmp_path: Path) -> None:
    # a grader raises on tasks 0, 4 and 8 of 12: 3 of 12 samples errored, the other 9 scored
    args = [ENV, "--env-arg", "crash_every=4", "-n", "12", "--model", "m", "--concurrency", "4"]
    with FakeServer() as srv:
        run = tmp_path / "any"
        proc = spawn(*args, "--base-url", srv.url, "--out", str(run))
        output, _ = proc.communicate(timeout=120)
        assert proc.returncode == 1, output  # a shell or CI sees the failure
        assert (
            "3 of 12 samples errored (first: grader: grader 'sometimes' raised RuntimeError: grader bug"
            in output
        )
        assert (
            "grader: 3 samples, e.g. grader 'sometimes' raised RuntimeError: grader bug on add-0-0" in output
        )
        assert "any errored sample fails an eval" in output and "Traceback" not in output
        assert len(load_records(run / "results.jsonl")) == 12  # written and flushed in full
        summary = json.loads((run / "summary.json").read_text())
        assert (summary["n_scored"], summary["n_errors"], summary["errors_by_kind"]) == (9, 3, {"grader": 3})
        assert summary["error_examples"] == {
            "grader": "grader 'sometimes' raised RuntimeError: grader bug on add-0-0"
        }
        assert "grader bug on add-0-0" in (run / "report.html").read_text()
        assert json.loads((run / "config.json").read_text())["config"]["fail_on_error"] is True
        toml = tmp_path / "t.toml"
        toml.write_text("fail_on_error = 4\n")
        cases = [  # a share of the 12 samples below 1, else a count; at the threshold fails
            (["--fail-on-error", "0.25"], 1),
            (["--fail-on-error", "0.3"], 0),
            (["--fail-on-error", "3"], 1),
            (["--fail-on-error", "4"], 0),
            (["--fail-on-error", "0"], 1),  # 0: any error, as inspect_ai reads it
            (["--no-fail-on-error"], 0),
            (["--config", str(toml)], 0),
            (["--config", str(toml), "--fail-on-error", "2"], 1),  # the flag over the file
        ]
        for i, (extra, want) in enumerate(cases):
            code, out = cli(*args, "--base-url", srv.url, "--out", str(tmp_path / f"c{i}"), *extra)
            assert code == want, (extra, out)
            assert "3 of 12 samples errored" in out and "grader: 3 samples" in out, out
            assert ("exit 1: 3 of 12 samples errored" in out) == (want == 1), (extra, out)
        code, out = cli(*args, "--no-fail-on-error", "--fail-on-error", "3", "--base-url", srv.url)
        assert code == 2 and "not both" in out, out
        code, out = cli(*args, "--fail-on-error", "-1", "--base-url", srv.url)
        assert code == 2 and "no threshold" in out, out
        # every sample fine: exit 0 and no errored line
        code, out = cli(*args[:1], *args[3:], "--base-url", srv.url, "--out", str(tmp_path / "ok"))
        assert code == 0 and "samples errored" not in out and "exit 1" not in out, out
        # every sample errored: exit 1 whatever the threshold
        code, out = cli(
            ENV, "--env-arg", "crash_every=1", "-n", "3", "--model", "m", "--no-fail-on-error",
            "--base-url", srv.url, "--out", str(tmp_path / "all"),
        )  # fmt: skip
        assert code == 1 and "every sample errored" in out, out


def test_kill_9_then_resume_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    args = ["-n", "40", "-k", "3", "--concurrency", "4", "--seed", "11", "--model", "m"]
    cut = random.Random().randint(5, 90)  # of the 120 samples; a new point on each run
    # the second server answers `cut` requests and holds the rest: the kill provably lands mid-run
    with FakeServer(delay_s=0.02) as srv, FakeServer(hold_after=cut) as held:
        code, out = cli(ENV, "--base-url", srv.url, *args, "--out", str(tmp_path / "full"))
        assert code == 0, out
        killed = tmp_path / "killed"
        proc = spawn(ENV, "--base-url", held.url, *args, "--out", str(killed))
        wait_for_lines(killed / "results.jsonl", cut, proc)
        proc.kill()
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        code, out = cli("--out", str(killed), "--resume", "--base-url", srv.url)
        assert code == 0, out
    lines = (killed / "results.jsonl").read_text().splitlines()
    keys = [(json.loads(x)["task_id"], json.loads(x)["sample_index"]) for x in lines]
    assert len(keys) == len(set(keys)) == 120
    full = {(r.task_id, r.sample_index): r for r in load_records(tmp_path / "full" / "results.jsonl")}
    for r in load_records(killed / "results.jsonl"):
        twin = full[(r.task_id, r.sample_index)]
        assert (r.score, r.trajectory.final_text, r.sampling) == (
            twin.score,
            twin.trajectory.final_text,
            twin.sampling,
        )
    a = json.loads((tmp_path / "full" / "summary.json").read_text())
    b = json.loads((killed / "summary.json").read_text())
    assert comparable(a) == comparable(b)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_leaves_a_valid_file_and_says_how_to_resume(tmp_path: Path, sig: signal.Signals) -> None:
    # the server answers 4 requests and holds the rest: the signal provably lands mid-run, at any speed
    with FakeServer(hold_after=4) as srv:
        run = tmp_path / "c"
        proc = spawn(
            ENV, "--base-url", srv.url, "--model", "m", "-n", "200", "--concurrency", "2", "--out", str(run)
        )
        wait_for_lines(run / "results.jsonl", 4, proc)
        proc.send_signal(sig)
        output, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, output
    assert "--resume" in output and str(run) in output and "Traceback" not in output
    records = load_records(run / "results.jsonl")
    assert len(records) == 4
    assert (run / "results.jsonl").read_bytes().endswith(b"\n")


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad_rows = tmp_path / "rows.jsonl"
    bad_rows.write_text('{"id": 1, "q": "1+1", "a": "2"}\n{"id": 2, "q": \n')
    toml = tmp_path / "c.toml"
    toml.write_text("num_taskz = 3\n")
    orphan = tmp_path / "orphan"  # results but no config.json: not a run to resume (a fresh folder is)
    orphan.mkdir()
    (orphan / "results.jsonl").write_text("{}\n")
    dataset = tmp_path / "data.jsonl"
    dataset.write_text('{"question": "1+1=", "answer": "2"}\n{"question": 5\n')
    cases = {
        "data.jsonl:2: invalid JSON": [
            "verigym.envs.dataset_env:DatasetEnv",
            "--env-arg",
            f"tasks={dataset}",
            "--base-url",
            "http://127.0.0.1:9/v1",
        ],
        "unknown environment 'no-such-env'": ["no-such-env"],
        "--env-arg 'oops'": [ENV, "--env-arg", "oops"],
        "has no argument 'colour'": ["arithmetic", "--env-arg", "colour=red"],
        "rows.jsonl:2": [ENV, "--env-arg", f"path={bad_rows}", "--base-url", "http://127.0.0.1:9/v1"],
        "cannot reach http://127.0.0.1:9/v1": [ENV, "--base-url", "http://127.0.0.1:9/v1"],
        "VERIGYM_TEST_NO_KEY is not set": [
            ENV,
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--api-key-env",
            "VERIGYM_TEST_NO_KEY",
        ],
        "unknown key 'num_taskz'": [ENV, "--config", str(toml)],
        "--resume needs --out": [ENV, "--resume"],
        "does not exist": [ENV, "--resume", "--out", str(orphan)],
    }
    for expected, args in cases.items():
        code, out = cli(*args)
        assert code == 2, (args, out)
        assert expected in out and "Traceback" not in out, (expected, out)
        assert len(out.strip().splitlines()) == 1, out


def test_existing_results_need_resume_and_resume_keeps_identity(tmp_path: Path) -> None:
    with FakeServer() as srv:
        run = str(tmp_path / "r")
        assert cli(ENV, "--base-url", srv.url, "-n", "3", "--out", run)[0] == 0
        code, out = cli(ENV, "--base-url", srv.url, "-n", "3", "--out", run)
        assert code == 2 and "--resume" in out
        code, out = cli(ENV, "--base-url", srv.url, "--out", run, "--resume", "--seed", "9")
        assert code == 2 and "seed was 0" in out
        code, out = cli(
            "--base-url", srv.url, "--out", run, "--resume", "-n", "5"
        )  # more tasks: only the new ones run
        assert code == 0, out
    assert len(load_records(Path(run) / "results.jsonl")) == 5 and len(srv.requests) == 5


def test_no_base_url_uses_the_embedded_default_policy(tmp_path: Path) -> None:
    run = tmp_path / "d"
    code, out = cli(
        "arithmetic", "-n", "2", "-k", "2", "--max-tokens", "4", "--model", "tiny", "--out", str(run)
    )
    assert code == 0, out
    assert "untrained tiny model" in out
    summary = json.loads((run / "summary.json").read_text())
    assert summary["n_samples"] == 4 and summary["n_errors"] == 0
    config = json.loads((run / "config.json").read_text())
    assert config["config"]["base_url"] == [] and "tiny" in config["policy"]
    code, out = cli(
        "arithmetic", "-n", "1", "--model", str(tmp_path / "no-model-here"), "--out", str(tmp_path / "e")
    )
    assert code == 2 and "no-model-here: no such directory" in out


def test_api_key_is_sent_and_a_rejected_key_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VERIGYM_TEST_KEY", "secret")
    monkeypatch.setenv("VERIGYM_TEST_BAD_KEY", "wrong")
    with FakeServer(api_key="secret") as srv:
        code, out = cli(
            ENV,
            "--base-url",
            srv.url,
            "--api-key-env",
            "VERIGYM_TEST_KEY",
            "-n",
            "2",
            "--out",
            str(tmp_path / "k"),
        )
        assert code == 0, out
        code, out = cli(
            ENV, "--base-url", srv.url, "--api-key-env", "VERIGYM_TEST_BAD_KEY", "--out", str(tmp_path / "b")
        )
    assert (
        code == 2 and "HTTP 401" in out and "Incorrect API key" in out and len(out.strip().splitlines()) == 1
    )
