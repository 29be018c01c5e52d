"""Sandboxed code grading vs bare ``python3 -c`` on the same work.

For every line of the labeled code suite (``tests/suites/code.jsonl``) both sides run the
candidate solution against its tests, one candidate at a time:

- bare:    ``python3 -c "<solution>\\n<tests>"`` (no isolation at all; the verdict is the exit code,
           which is exactly what a hostile candidate can fake);
- verigym: ``bench_verdict(line)``: bwrap sandbox + cgroup + rlimits + uid drop, the candidate in a
           sandboxed worker, each assert a separate call whose result is compared outside.

Prints each rate (isolated test runs/s = candidates fully graded per second), the overhead
ratio (bare rate / sandbox rate; target <= 1.3) and whether both sides agree with the labels.

    python benchmarks/sandbox.py [--rounds 3] [--suite tests/suites/code.jsonl]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from verigym.graders.code import bench_verdict
from verigym.graders.code.sandbox import python_executable


def bare(line: dict[str, Any], python: str, flags: list[str]) -> bool:
    src = f"{line['solution']}\n{line['tests']}"
    proc = subprocess.run([python, *flags, "-c", src], capture_output=True, timeout=30, check=False)
    return proc.returncode == 0


def timed(fn: Any, lines: list[dict[str, Any]]) -> tuple[float, int]:
    start = time.perf_counter()
    correct = sum(fn(line) == (line["expect"] == "pass") for line in lines)
    return time.perf_counter() - start, correct


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", default=str(Path(__file__).resolve().parents[1] / "tests/suites/code.jsonl"))
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds per side (median is reported)")
    args = ap.parse_args()
    lines = [json.loads(x) for x in Path(args.suite).read_text().splitlines() if x.strip()]
    python = python_executable()
    sides = {
        "bare python3 -c": lambda ln: bare(ln, python, []),
        "bare python3 -S -I -c": lambda ln: bare(ln, python, ["-S", "-I"]),
        "verigym sandbox": bench_verdict,
    }
    bench_verdict(lines[0])  # warm-up: the sandbox probe and the worker source are cached once
    runs: dict[str, list[tuple[float, int]]] = {name: [] for name in sides}
    for _ in range(args.rounds):  # interleaved, so a change in machine load hits every side alike
        for name, fn in sides.items():
            runs[name].append(timed(fn, lines))
    results = {name: (statistics.median(r[0] for r in rs), rs[0][1]) for name, rs in runs.items()}
    n = len(lines)
    print(f"suite: {args.suite} ({n} candidates), rounds: {args.rounds}, interpreter: {python}")
    print(f"{'side':<24}{'runs/s':>10}{'s/run':>10}{'agree':>10}")
    for name, (secs, correct) in results.items():
        print(f"{name:<24}{n / secs:>10.1f}{secs / n * 1000:>9.1f}ms{correct:>6}/{n}")
    base = n / results["bare python3 -c"][0]
    ours = n / results["verigym sandbox"][0]
    print(f"sandbox overhead vs bare python3 -c: {base / ours:.2f}x (target <= 1.3x)")
    lean = n / results["bare python3 -S -I -c"][0]
    print(f"sandbox overhead vs bare python3 -S -I -c: {lean / ours:.2f}x")


if __name__ == "__main__":
    main()
