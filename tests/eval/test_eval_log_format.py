"""The results log is byte-for-byte stable: a seeded eval writes the same ``results.jsonl`` lines.

The eval engine builds its records on a fast path (trusted construction of the nouns its own code
has already checked, an inline grader); the log a user reads must not change with it. The golden
file was written by the engine before that work (``python tests/eval/test_eval_log_format.py
--write`` regenerates it); the run below goes through the real client against a real local
server with retries, a permanent error, token ids, logprobs and a multi-grader rubric. Only
timings (``started_at``, ``wall_s``) and the server's port are masked; of ``summary.json``'s run
header (``verigym.record``) the versions, revision and times are left out.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from verigym.envs.builtin.arithmetic import ArithmeticEnv
from verigym.eval.config import EvalConfig
from verigym.eval.run import evaluate
from verigym.policies.openai import OpenAIPolicy
from verigym.testing import FakeOpenAIServer, arithmetic_answer

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "eval_log"
_TIMING = re.compile(rb'"(started_at|wall_s)":[-0-9.eE+]+')
_PORT = re.compile(rb"127\.0\.0\.1:[0-9]+")


def answer(body: dict[str, Any]) -> str:
    value = int(arithmetic_answer(body)) + (body.get("seed") or 0) % 3 - 1
    return [f"{value}", f"The answer is \\boxed{{{value}}}.", f"<think>hmm</think>Answer: {value}"][
        (body.get("seed") or 0) % 3
    ]


def plan(body: dict[str, Any], attempt: int) -> str | None:
    seed = body.get("seed") or 0
    if seed % 11 == 0:
        return "400"  # a permanent error: the record carries it
    return "500" if seed % 5 == 0 and attempt == 0 else None  # retried, then answered


def logprobs(body: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    for choice in payload["choices"]:
        words = choice["message"]["content"].split()
        choice["logprobs"] = {
            "content": [{"token": w, "logprob": -0.25 * (j + 1)} for j, w in enumerate(words)]
        }
    return payload


async def run(out: Path) -> None:
    env = ArithmeticEnv(level=4, graders="digits")
    config = EvalConfig(
        env="arithmetic", num_tasks=24, samples_per_task=2, concurrency=8, seed=3, max_tokens=32
    )
    with FakeOpenAIServer(plan, answer=answer, shape=logprobs, vllm=True) as server:
        policy = OpenAIPolicy("fake-model", [server.url], concurrency=8, backoff_base=0.01, max_retries=2)
        await evaluate(env, policy, env.tasks(24, seed=0), config, out=out)
        await policy.aclose()


def masked_lines(path: Path) -> list[bytes]:
    """The lines in task then sample order (completion order varies), timings zeroed."""
    lines = [
        _PORT.sub(b"127.0.0.1:PORT", _TIMING.sub(rb'"\1":0', line)) for line in path.read_bytes().splitlines()
    ]
    return sorted(lines, key=lambda line: (json.loads(line)["task_id"], json.loads(line)["sample_index"]))


_HEADER_KEPT = ("format_version", "kind", "seeds", "resumed")  # the rest: this machine, this moment
_CONFIG_KEPT = ("env", "num_tasks", "samples_per_task", "concurrency", "seed", "max_tokens")  # as set


def masked_summary(path: Path) -> dict[str, Any]:
    """The summary without timings and the port; of its run header (``verigym.record``) the fields
    that do not depend on the machine or the moment, and of its config the options the run set."""
    summary = json.loads(_PORT.sub(b"127.0.0.1:PORT", path.read_bytes()))
    run = summary.get("run")
    if isinstance(run, dict):
        config = {k: run["config"][k] for k in _CONFIG_KEPT}
        summary["run"] = {**{k: run[k] for k in _HEADER_KEPT}, "config": config}
    return {k: v for k, v in summary.items() if "wall" not in k and "per_s" not in k}


def test_results_log_is_byte_identical_to_the_golden_run(tmp_path: Path) -> None:
    asyncio.run(run(tmp_path))
    lines = masked_lines(tmp_path / "results.jsonl")
    golden = (GOLDEN / "results.jsonl").read_bytes().splitlines()
    assert len(lines) == len(golden) == 48
    assert any(b'"error":{"kind":"bad_request"' in line for line in lines)  # the log covers errors
    assert any(b'"logprobs":[-0.25' in line for line in lines)
    for got, want in zip(lines, golden, strict=True):
        assert got == want
    assert masked_summary(tmp_path / "summary.json") == json.loads((GOLDEN / "summary.json").read_text())


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(Path(tmp)))
        GOLDEN.mkdir(parents=True, exist_ok=True)
        (GOLDEN / "results.jsonl").write_bytes(b"\n".join(masked_lines(Path(tmp) / "results.jsonl")) + b"\n")
        summary = masked_summary(Path(tmp) / "summary.json")
        (GOLDEN / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
