"""Parallel math checks: ``run_bench(..., jobs=N)`` (``verifier-bench --jobs N``) against one job.

Issue 17 item 1 asks for ``--jobs N`` scaling near-linear. ``run_bench`` checks a named family's
lines in N processes (each imports and warms the grader before the clock starts), because the
in-process fast paths hold the GIL. A public suite takes well under a second, so one pass
measures each process's first-use costs more than its throughput; here each suite is checked
``--passes`` times over in one run, every check cold (this module is the bench family: it clears
the grader's verdict and parse caches before each line, in whichever process checks it), so every
pass is real work and nothing is reused between copies. Each round runs both settings, each in a
fresh process (both pay the same first-use costs), the one that goes first alternating. Prints checks/s per side and round, the median speed-up, and
MET/NOT MET against near-linear, taken as >= 0.8 x N.

    .venv/bin/python benchmarks/math_jobs.py [--jobs 2] [--rounds 4] [--passes 8] [--suite PATH ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # so the bench children import this module as benchmarks.math_jobs

from verigym.graders.bench import run_bench  # noqa: E402
from verigym.graders.math import _equivalence as math_family  # noqa: E402
from verigym.graders.math import clear_caches  # noqa: E402

SUITES = ROOT.parent / "shared" / "benchmarks" / "verifier-suites"
EFFICIENCY = 0.8  # near-linear: N jobs give at least 0.8 x N the checks/s of one
SUITE_FIELDS = math_family.SUITE_FIELDS
bench_warmup = math_family.bench_warmup


def bench_verdict(line: dict[str, Any]) -> bool:
    """The math family's verdict, every cache cleared first (a cold check)."""
    clear_caches()
    return math_family.bench_verdict(line)


def repeated(suite: Path, passes: int, into: Path) -> Path:
    rows = [json.loads(s) for s in suite.read_text().splitlines() if s.strip()]
    out = into / f"{suite.stem}-x{passes}.jsonl"
    with out.open("w") as fh:
        for k in range(passes):
            for row in rows:
                fh.write(json.dumps({**row, "id": f"{row['id']}#{k}"}) + "\n")
    return out


def checks_per_s(suite: Path, jobs: int) -> float:
    """One measurement in a fresh process, so that neither side inherits a warm interpreter."""
    argv = [sys.executable, __file__, "--measure", str(jobs), str(suite)]
    out = subprocess.run(argv, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def measure(jobs: int, suite: Path) -> None:
    res = run_bench("benchmarks.math_jobs", suite, jobs=jobs)
    if any(o.error for o in res.outcomes):
        raise SystemExit(f"{suite.name}: errors in the run: {[o.error for o in res.outcomes if o.error][:3]}")
    print(len(res.outcomes) / res.wall_s)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=2, help="N, compared with 1 (default 2).")
    ap.add_argument("--rounds", type=int, default=4, help="Rounds per suite (default 4).")
    ap.add_argument("--passes", type=int, default=8, help="Copies of each suite per run (default 8).")
    ap.add_argument(
        "--suite",
        type=Path,
        action="append",
        help="Labeled suite(s) (default: math-verify-tests and hardverify-math from ../shared).",
    )
    ap.add_argument("--measure", nargs=2, metavar=("JOBS", "SUITE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure:
        measure(int(args.measure[0]), Path(args.measure[1]))
        return
    suites = args.suite or [SUITES / "math-verify-tests.jsonl", SUITES / "hardverify-math.jsonl"]
    print(f"cores: {os.cpu_count()}, load average at start: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        for suite in suites:
            big = repeated(suite, args.passes, Path(tmp))
            ratios = []
            for r in range(args.rounds):
                order = (1, args.jobs) if r % 2 == 0 else (args.jobs, 1)
                got = {jobs: checks_per_s(big, jobs) for jobs in order}
                ratios.append(got[args.jobs] / got[1])
                print(
                    f"{suite.name} x{args.passes} round {r + 1}: --jobs 1 {got[1]:.0f}/s, "
                    f"--jobs {args.jobs} {got[args.jobs]:.0f}/s, x{ratios[-1]:.2f}"
                )
            med = statistics.median(ratios)
            goal = EFFICIENCY * args.jobs
            verdict = "MET" if med >= goal else "NOT MET"
            print(
                f"{suite.name}: median speed-up x{med:.2f} with {args.jobs} jobs (target >= {goal:.1f}) {verdict}"
            )
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
