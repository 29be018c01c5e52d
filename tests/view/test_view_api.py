"""The viewer without a browser: the byte-offset index against the results store, the sample table's
filters, the comparison against ``verigym compare``, the training run's steps, and the server's refusals
(paths outside the runs directory, bad parameters), over HTTP to a real server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from verigym.eval.compare import compare_runs
from verigym.eval.store import iter_latest, load_records
from verigym.view import Query, QueryError, ResultsIndex, compare_indexes, run_query


def _get(base: str, path: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(base + path, timeout=30) as res:
            return res.status, json.loads(res.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _q(**kw: str) -> Query:
    return Query.parse(kw)


def test_index_matches_the_store_and_follows_a_growing_file(runs_dir: Path, tmp_path: Path) -> None:
    src = runs_dir / "evals" / "before" / "results.jsonl"
    path = tmp_path / "results.jsonl"
    lines = src.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:5]) + lines[5][:40])  # a line being written
    index = ResultsIndex(path)
    assert index.refresh() and len(index) == 5
    with path.open("ab") as fh:  # the line completes, more follow, one sample is redone (a resume)
        fh.write(lines[5][40:] + b"".join(lines[6:]) + lines[0])
        fh.write(
            b'{"env": "calc", "model": "m", "task_id": "spaced", "sample_index": 0, "sampling": {}, '
            b'"trajectory": {"stop_reason": "done"}, "score": {"grades": {}, "reward": 0.5}, '
            b'"usage": {"prompt_tokens": 1, "completion_tokens": 2}, "wall_s": 0.1, "error": null}\n'
        )
    assert index.refresh()
    assert len(index) == len(lines) + 2
    live = [index.row(i) for i in range(len(index)) if index.row(i)["superseded"] is False]
    latest = list(iter_latest(src))
    assert sorted((r["task_id"], r["sample_index"]) for r in live if r["task_id"] != "spaced") == sorted(
        (r.task_id, r.sample_index) for r in latest
    )
    assert index.row(len(index) - 1)["reward"] == 0.5  # a line not in the compact layout still reads
    errored = [r for r in load_records(src) if r.error is not None]
    assert all(index.row(i)["reward"] is not None for i in range(len(index)) if index.row(i)["error"] is None)
    assert len(errored) == sum(index.row(i)["error"] == "policy" for i in range(len(lines)))
    path.write_bytes(b"".join(lines[:3]))  # rewritten shorter (a resume compacts the file): read again
    assert index.refresh() and len(index) == 3 and index.bad_lines == 0


def test_filters_sorting_paging_and_text(runs_dir: Path) -> None:
    index = ResultsIndex(runs_dir / "evals" / "before" / "results.jsonl")
    index.refresh()
    everything = run_query(index, _q(limit="500"))
    assert everything["matched"] == everything["total"] == 24
    assert run_query(index, _q(reward_max="0"))["matched"] == 8  # tasks 8-11, two samples each
    assert run_query(index, _q(grader="correct", grader_min="1"))["matched"] == 16
    assert run_query(index, _q(task="calc-1", limit="500"))["matched"] == 6  # calc-1, calc-10, calc-11
    assert run_query(index, _q(error="any"))["matched"] == 0
    assert run_query(index, _q(stop="done"))["matched"] == 24
    assert run_query(index, _q(wall_min="0.2"))["matched"] == 4  # tasks 10 and 11
    found = run_query(index, _q(text="WINDOW.__PWNED"))  # case-insensitive, as written in the JSON
    assert [(r["task_id"], r["sample_index"]) for r in found["rows"]] == [("calc-1", 1)]
    ordered = run_query(index, _q(sort="task_id", desc="1", limit="3", offset="1"))
    assert [r["task_id"] for r in ordered["rows"]] == ["calc-9", "calc-8", "calc-8"]
    by_reward = run_query(index, _q(sort="reward", limit="500"))["rows"]
    assert [r["reward"] for r in by_reward] == sorted(r["reward"] for r in by_reward)
    with pytest.raises(QueryError, match="reward_min: expected a number, got 'high'"):
        _q(reward_min="high")
    with pytest.raises(QueryError, match="unknown query parameter 'colour'"):
        _q(colour="red")
    with pytest.raises(QueryError, match="grader: no grader 'speed' in this run"):
        run_query(index, _q(grader="speed"))


def test_comparison_is_verigym_compares(runs_dir: Path) -> None:
    a, b = runs_dir / "evals" / "before", runs_dir / "evals" / "after"
    ia, ib = ResultsIndex(a / "results.jsonl"), ResultsIndex(b / "results.jsonl")
    ia.refresh()
    ib.refresh()
    ours = compare_indexes(ia, ib)
    theirs = compare_runs(a, b)
    assert ours["paired_tasks"] == len(theirs.tasks) == 12
    assert ours["delta"] == pytest.approx(theirs.delta)
    assert ours["ci95"] == pytest.approx(list(theirs.ci95 or ()))
    assert ours["p_b_not_better"] == pytest.approx(theirs.p_b_not_better)
    assert (ours["pass_to_fail"], ours["fail_to_pass"], ours["errors_b"]) == (4, 4, 1)
    lost = compare_indexes(ia, ib, show="pass_to_fail")["tasks"]
    assert [t["task_id"] for t in lost] == ["calc-4", "calc-5", "calc-6", "calc-7"]
    assert all(t["a"] == 1.0 and t["b"] == 0.0 for t in lost)


def test_server_lists_runs_pages_samples_and_steps(viewer: str) -> None:
    status, body = _get(viewer, "/api/runs")
    assert status == 200
    kinds = {r["id"]: r["kind"] for r in body["runs"]}
    assert kinds == {
        "agent": "eval",
        "evals/after": "eval",
        "evals/before": "eval",
        "select": "select",
        "train": "train",
    }
    status, page = _get(viewer, "/api/samples?run=evals/after&error=any")
    assert status == 200 and [r["error"] for r in page["rows"]] == ["policy"]
    status, sample = _get(viewer, "/api/sample?run=agent&row=0")
    assert status == 200 and sample["calls"][1] == {
        "call": 1,
        "kind": "auxiliary",
        "parent": 0,
        "dialect": "chat",
        "wall_s": 0.01,
    }
    sources = [m["source"] for m in sample["messages"]]
    assert sources == ["prompt", "prompt", "branch", "model", "env", "model"]
    # each completion carries its gateway call: the branch is call 1 (auxiliary), the main line 0 then 2
    assert [m["call"] for m in sample["messages"] if "call" in m] == [1, 0, 2]
    assert sample["tool_schemas"][0]["function"]["name"] == "calc"  # the calc env's own schema
    assert sample["tokens_decoded"] and all(t["text"] is not None for t in sample["messages"][-1]["tokens"])
    status, curves = _get(viewer, "/api/train?run=train")
    assert status == 200 and [r["step"] for r in curves["rows"]] == [0, 1, 2]
    assert curves["sft_point"] == 0.25 and curves["steps_with_rollouts"] == [0, 1, 2]
    status, step = _get(viewer, "/api/step?run=train&step=1")
    assert status == 200 and len(step["groups"]) == 2
    held = step["heldout"]  # the held-out eval after step 1 (eval_every 2), its 8 tasks kept
    assert held["step"] == 1 and len(held["samples"]) == 8
    assert {s["env"] for s in held["samples"]} == {"digits-view-test"} and all(
        "=" in s["prompt"] for s in held["samples"]
    )
    for group in step["groups"]:
        assert len(group["samples"]) == 4
        for s in group["samples"]:
            assert s["tokens"] and all(
                t["sampler"] is not None and t["trainer"] is not None for t in s["tokens"]
            )
            assert s["gap_max"] < 1e-3  # same weights, same tokens: the two logprobs agree
        advantages = [s["advantage"] for s in group["samples"]]
        assert sum(advantages) == pytest.approx(0.0, abs=1e-6)  # GRPO: centred within the group


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/api/run?run=../", 403),
        ("/api/run?run=%2Fetc", 403),
        ("/api/run?run=evals/../../", 403),
        ("/api/run?run=escape", 403),  # a symlink out of the runs directory
        ("/api/run?run=nowhere", 404),
        ("/api/sample?run=evals/before&row=999", 404),
        ("/api/sample?run=evals/before&row=-1", 400),
        ("/api/report?run=evals/before&name=../../before/results.jsonl", 403),
        ("/api/report?run=evals/before&name=..%2Fafter%2Freport.html", 403),
        ("/api/samples?run=evals/before&limit=ten", 400),
        ("/api/samples?run=train", 400),
        ("/api/step?run=train&step=99", 404),
        ("/static/..%2Fview%2F_app.py", 404),
    ],
)
def test_server_refuses(viewer: str, runs_dir: Path, path: str, status: int) -> None:
    link = runs_dir / "escape"
    if not link.exists():
        link.symlink_to(runs_dir.parent, target_is_directory=True)
    got, body = _get(viewer, path)
    assert got == status
    assert isinstance(body["error"], str) and "\n" not in body["error"] and "Traceback" not in body["error"]


def test_page_is_sent_with_a_script_policy(viewer: str) -> None:
    with urllib.request.urlopen(viewer + "/", timeout=30) as res:
        csp = res.headers["content-security-policy"]
        page = res.read().decode()
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert '<script src="/static/app.js"' in page


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_cli_warns_off_loopback_and_refuses_a_missing_folder(runs_dir: Path, tmp_path: Path) -> None:
    cli = [sys.executable, "-m", "verigym"]
    done = subprocess.run([*cli, "view", str(tmp_path / "none")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].endswith("no such directory")
    port = _free_port()
    env = {**os.environ, "COLUMNS": "200"}
    proc = subprocess.Popen(
        [*cli, "view", str(runs_dir), "--host", "0.0.0.0", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        out = ""
        deadline = time.monotonic() + 60
        while "verigym view:" not in out and time.monotonic() < deadline:
            out += proc.stdout.readline() if proc.stdout else ""
        assert "warning: --host 0.0.0.0 is not loopback" in out
        body: Any = None
        while body is None and time.monotonic() < deadline:
            try:
                body = _get(f"http://127.0.0.1:{port}", "/api/runs")[1]
            except urllib.error.URLError:  # not listening yet
                time.sleep(0.1)
        assert body is not None and len(body["runs"]) == 5
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_rollout_sample_is_bounded_and_a_resume_drops_the_redone_steps(
    runs_dir: Path, tmp_path: Path
) -> None:
    from verigym.train.rollouts import HELDOUT_FILE, ROLLOUTS_FILE, RolloutSample

    held = [json.loads(x)["step"] for x in (runs_dir / "train" / HELDOUT_FILE).read_text().splitlines()]
    assert held == [1, 2]  # an eval after every second step and after the last
    lines = (runs_dir / "train" / ROLLOUTS_FILE).read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [0, 1, 2]
    assert all(len(json.loads(x)["groups"]) == 2 for x in lines)  # logging.rollout_groups = 2 of 3 groups
    copy = tmp_path / ROLLOUTS_FILE
    copy.write_text("\n".join(lines) + "\n")
    RolloutSample(tmp_path, 2, tokenizer=None).truncate_after(0)  # resumed after step 0
    assert [json.loads(x)["step"] for x in copy.read_text().splitlines()] == [0]
