"""Remote environments when servers fail: real ``verigym env-server`` processes on 127.0.0.1, one killed
with SIGKILL mid-run.

- Two servers behind one client share the sessions; when one dies, its episodes go on on the other
  (re-opened before their first step, replayed and checked after it) and the run ends with every
  sample scored as the local environment scores it. The replay is also proven on an episode whose
  server the policy itself kills right after the episode's first step.
- The only live server dies: the samples it had end as errors naming it (never zeros); with a server
  up again, ``--resume`` finishes the run with the local scores.
- A full server (``--max-sessions``) answers 429 with ``Retry-After``: the client waits, nothing errors.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

import verigym
from verigym.envs.registry import load_env
from verigym.envserver import EnvServer
from verigym.eval.store import load_records
from verigym.policies.scripted import Reply, ScriptedPolicy
from verigym.types import Message, ToolCall

OPTIONS: dict[str, Any] = {"num_tasks": 40, "samples_per_task": 1, "seed": 5, "concurrency": 8}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn(port: int, *extra: str) -> subprocess.Popen[bytes]:
    """``verigym env-server calc --port PORT`` in its own process, once its ``/health`` answers."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "verigym", "env-server", "calc", "--port", str(port), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    end = time.monotonic() + 90
    while time.monotonic() < end:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError(f"env-server on port {port} never answered /health")


def kill(proc: subprocess.Popen[bytes]) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def slow_solver(delay_s: float = 0.1) -> ScriptedPolicy:
    """calc's answer through its tool, each turn taking ``delay_s``: episodes are in flight for a while."""

    def reply(messages: Sequence[Message]) -> Reply:
        result = next((m.content for m in reversed(messages) if m.role == "tool"), None)
        if result is not None:
            return result
        asked = re.search(r"\d+\*\d+", messages[-1].content)
        assert asked is not None
        return "", [ToolCall(id="c0", name="calc", arguments=json.dumps({"expr": asked.group(0)}))]

    return ScriptedPolicy(reply, name="slow-solver", delay_s=delay_s)


def run_in_thread(env: Any, out: Path, **options: Any) -> tuple[threading.Thread, dict[str, Any]]:
    box: dict[str, Any] = {}

    def target() -> None:
        box["run"] = verigym.evaluate(env, slow_solver(), out=out, **{**OPTIONS, **options})

    thread = threading.Thread(target=target)
    thread.start()
    return thread, box


def wait_for_lines(path: Path, n: int, limit: float = 60) -> None:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if path.exists() and path.read_bytes().count(b"\n") >= n:
            return
        time.sleep(0.005)
    raise AssertionError(f"{path} never reached {n} lines")


def rewards(path: Path) -> dict[tuple[str, int], float | None]:
    return {(r.task_id, r.sample_index): r.score.reward for r in load_records(path)}


@pytest.fixture(scope="module")
def local_rewards(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, int], float | None]:
    out = tmp_path_factory.mktemp("local") / "run"
    verigym.evaluate("calc", slow_solver(0.0), out=out, **OPTIONS)
    return rewards(out / "results.jsonl")


def test_a_server_killed_mid_run_hands_its_sessions_to_the_other(
    tmp_path: Path, local_rewards: dict[tuple[str, int], float | None]
) -> None:
    ports = free_port(), free_port()
    procs = [spawn(p) for p in ports]
    try:
        env = load_env(",".join(f"http://127.0.0.1:{p}" for p in ports))
        thread, box = run_in_thread(env, tmp_path / "run")
        wait_for_lines(tmp_path / "run" / "results.jsonl", 4)
        kill(procs[0])
        thread.join(120)
    finally:
        for proc in procs:
            if proc.poll() is None:
                kill(proc)
    assert box["run"].summary["n_errors"] == 0
    assert rewards(tmp_path / "run" / "results.jsonl") == local_rewards
    assert env.pool.stats["server_failures"] >= 1  # type: ignore[attr-defined]
    moved = [
        r for r in load_records(tmp_path / "run" / "results.jsonl") if r.trajectory.state.get("failovers")
    ]
    assert all(r.trajectory.state["server"] == f"http://127.0.0.1:{ports[1]}" for r in moved)


def test_an_episode_whose_server_dies_after_a_step_is_replayed_on_the_other(
    tmp_path: Path, local_rewards: dict[tuple[str, int], float | None]
) -> None:
    ports = free_port(), free_port()
    procs = {f"http://127.0.0.1:{p}": spawn(p) for p in ports}
    env = load_env(",".join(procs))
    solver = slow_solver(0.0)
    killed: list[str] = []

    def kill_then_answer(messages: Sequence[Message]) -> Reply:
        if messages[-1].role == "tool" and not killed:  # the episode's first step is on its server
            (url,) = [s.url for s in env.pool.servers if s.open == 1]  # type: ignore[attr-defined]
            kill(procs[url])
            killed.append(url)
        return solver._fn(messages)  # type: ignore[return-value]

    try:
        run = verigym.evaluate(
            env, ScriptedPolicy(kill_then_answer), out=tmp_path / "run", **{**OPTIONS, "concurrency": 1}
        )
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                kill(proc)
    assert run.summary["n_errors"] == 0 and rewards(tmp_path / "run" / "results.jsonl") == local_rewards
    (moved,) = [
        r for r in load_records(tmp_path / "run" / "results.jsonl") if r.trajectory.state.get("failovers")
    ]
    assert moved.trajectory.state["failovers"] == 1 and moved.trajectory.state["server"] != killed[0]
    assert [t.source for t in moved.trajectory.turns] == [
        "model",
        "env",
        "model",
    ]  # the replay is not recorded twice


def test_the_only_server_killed_mid_run_errors_then_resume_finishes(
    tmp_path: Path, local_rewards: dict[tuple[str, int], float | None]
) -> None:
    first, second = free_port(), free_port()  # the second is down until the resume
    url = f"http://127.0.0.1:{first}"
    address = f"{url},http://127.0.0.1:{second}"
    proc = spawn(first)
    try:
        thread, box = run_in_thread(address, tmp_path / "run")
        wait_for_lines(tmp_path / "run" / "results.jsonl", 4)
        kill(proc)
        thread.join(120)
    finally:
        if proc.poll() is None:
            kill(proc)
    summary = box["run"].summary
    assert 0 < summary["n_errors"] < 40 and set(summary["errors_by_kind"]) == {"env_server"}
    errored = [r for r in load_records(tmp_path / "run" / "results.jsonl") if r.error is not None]
    assert all(url in r.error.message and r.score.reward is None for r in errored), [
        r.error.message
        for r in errored
        if url not in r.error.message  # type: ignore[union-attr]
    ]
    proc = spawn(second)
    try:
        resumed = verigym.evaluate(address, slow_solver(), out=tmp_path / "run", resume=True, **OPTIONS)
    finally:
        kill(proc)
    assert resumed.summary["n_errors"] == 0 and resumed.skipped == 40 - summary["n_errors"]
    assert rewards(tmp_path / "run" / "results.jsonl") == local_rewards


def test_a_full_server_is_waited_on_with_its_retry_after(tmp_path: Path) -> None:
    with EnvServer({"calc": load_env("calc")}, max_sessions=2) as srv:
        env = load_env(srv.url)
        start = time.monotonic()
        run = verigym.evaluate(env, slow_solver(0.05), out=tmp_path / "run", **{**OPTIONS, "num_tasks": 12})
        wall = time.monotonic() - start
    assert run.summary["n_errors"] == 0 and run.summary["reward_mean"] == 1.0
    full = env.pool.stats["full"]  # type: ignore[attr-defined]
    assert full >= 1 and wall >= 1.0  # refused, then waited Retry-After: 1 ...
    assert full <= 6 * wall + 12  # ... not hammered: at most one retry a second per waiting sample
