"""Rubric wall time: independent graders run concurrently vs one at a time (issue 16 item 3).

The rubric: a rubric judge (an LLM judge over HTTP, two criteria), a sandboxed code grader (hidden
tests in bubblewrap), a second judge gated on the code grader (it runs only when the code passes),
a cheap format check, and a cheat-judge penalty. The judge is a real local FastAPI server
(``tests/agentic/agentic_judge_server.py``) answering after a fixed latency. The same rubric scores
the same trajectories with ``Rubric(concurrent=False)`` and ``Rubric(concurrent=True)``, sides
alternating round by round (which goes first alternates too); every round checks that both sides
give identical scores. Prints per-side median seconds per sample, the ratio, and MET/NOT MET
against the target (concurrent at least 1.3x faster: the issue asks for a wall-time gain).

    .venv/bin/python benchmarks/rubric_concurrency.py --rounds 6 --samples 4 --latency 0.3
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "agentic"))

from agentic_judge_server import start_judge

from verigym.graders.code import code_grader
from verigym.graders.hacking import cheat_judge
from verigym.graders.judge import judge_grader
from verigym.policies.openai import OpenAIPolicy
from verigym.rubric import Grader, Penalty, Rubric
from verigym.types import Grade, Message, Task, Trajectory, Turn

TARGET = 1.3
SOLUTION = "```python\n# {tag}\ndef add(a, b):\n    return a + b\n```"


def _format(task: Task, trajectory: Trajectory) -> Grade:
    return Grade(score=float("```python" in trajectory.final_text))


def build_rubric(judge: OpenAIPolicy) -> Rubric:
    return Rubric(
        [
            judge_grader(judge, ["The answer gives code.", "The code is short."], name="judge"),
            code_grader("code", mode="all"),
            judge_grader(judge, ["The code is idiomatic."], name="style_judge"),
            Grader(_format, name="format", weight=0.1),
        ],
        gates={"style_judge": ["code"]},
        penalties=[Penalty(cheat_judge(judge), amount=1.0)],
    )


def samples(n: int, tag: str) -> list[tuple[Task, Trajectory]]:
    """``n`` solutions; ``tag`` (a comment in the code) keeps the judge's verdict cache from hitting."""
    out = []
    for i in range(n):
        task = Task(
            id=f"add-{i}",
            prompt=(Message(role="user", content=f"Write add(a, b) (case {i})."),),
            info={"tests": f"assert add(1, {i}) == {1 + i}\nassert add(-1, 1) == 0\n", "entry_point": "add"},
        )
        traj = Trajectory(task_id=task.id, prompt=list(task.prompt))
        traj.turns.append(
            Turn(source="model", messages=[Message(role="assistant", content=SOLUTION.format(tag=tag))])
        )
        out.append((task, traj))
    return out


async def run_side(rubric: Rubric, items: list[tuple[Task, Trajectory]]) -> tuple[float, list[object]]:
    t0 = time.perf_counter()
    scores = [await rubric.score(task, traj.model_copy(deep=True)) for task, traj in items]
    wall = (time.perf_counter() - t0) / len(items)
    return wall, [(s.reward, {k: (g.score, g.error) for k, g in s.grades.items()}) for s in scores]


async def main_async(args: argparse.Namespace, base_url: str) -> dict[str, list[float]]:
    judge = OpenAIPolicy("judge", [base_url], max_retries=1)
    concurrent = build_rubric(judge)
    sequential = dataclasses.replace(concurrent, concurrent=False)
    await run_side(concurrent, samples(1, "warm-up c"))  # sandbox probe, HTTP connection
    await run_side(sequential, samples(1, "warm-up s"))
    times: dict[str, list[float]] = {"sequential": [], "concurrent": []}
    for r in range(args.rounds):
        order = [("sequential", sequential), ("concurrent", concurrent)]
        if r % 2:
            order.reverse()
        results = {}
        for side, rubric in order:
            wall, results[side] = await run_side(rubric, samples(args.samples, f"{side} {r}"))
            times[side].append(wall)
        if results["sequential"] != results["concurrent"]:
            raise SystemExit(f"round {r}: the two sides scored differently:\n{results}")
        print(
            f"round {r}: sequential {times['sequential'][-1]:.3f} s/sample, "
            f"concurrent {times['concurrent'][-1]:.3f} s/sample (scores identical)",
            flush=True,
        )
    await judge.aclose()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--samples", type=int, default=4, help="trajectories scored per side per round")
    parser.add_argument("--latency", type=float, default=0.3, help="judge server latency per request (s)")
    args = parser.parse_args()
    proc, base_url = start_judge(latency=args.latency)
    try:
        times = asyncio.run(main_async(args, base_url))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    seq, con = statistics.median(times["sequential"]), statistics.median(times["concurrent"])
    ratios = [s / c for s, c in zip(times["sequential"], times["concurrent"], strict=True)]
    ratio = statistics.median(ratios)
    print(f"machine: {platform.processor() or platform.machine()}, load average {os.getloadavg()}")
    print(f"judge latency {args.latency}s, {args.samples} samples x {args.rounds} rounds (alternating)")
    print(f"median s/sample: sequential {seq:.3f}, concurrent {con:.3f}")
    print(
        f"ratio sequential/concurrent (median of per-round ratios): {ratio:.2f}x "
        f"[min {min(ratios):.2f}, max {max(ratios):.2f}]"
    )
    print(f"{'MET' if ratio >= TARGET else 'NOT MET'} (target: concurrent ≥ {TARGET}x faster)")


if __name__ == "__main__":
    main()
