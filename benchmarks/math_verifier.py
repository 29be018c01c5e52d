"""verigym's math grader vs math-verify 0.9, side by side and interleaved, on the same labeled suites.

Suites: the two public files in ``../shared/benchmarks/verifier-suites/`` (math-verify's own test
cases, TinyV's HardVerify-Math) and verigym's ``tests/suites/math.jsonl`` and
``tests/suites/math_forms.jsonl`` (answers in the form the question demands). Sides:

* verigym: ``check_equivalent(gold, pred, mode=line.mode, question=line.question)`` with the
  default hard timeout (worker processes started before timing);
* math-verify with library defaults, one thread, the rule of the suites' README: gold wrapped in
  ``$...$`` unless it has ``$``, ``\\boxed``, ``\\(`` or ``\\[``; the prediction as given, and a
  second configuration with a bare prediction (no delimiters) wrapped in ``\\boxed{}``.
  math-verify has no strictness modes and does not read the question: it compares every line as
  "equivalent".

Fairness: the sides alternate round by round (a chunk of ``--chunk`` lines per round; the side
that goes first rotates every round), each round gives one verigym / math-verify ratio per
configuration, and the median of those ratios is the figure against the goal. Both sides get the
same inputs, and caches are handled the same way on both sides, in two policies reported side by
side:

* ``cold``: every cache is cleared before every line (verigym: its result cache and parse caches,
  in this process and in its workers; math-verify: its parser's ``lru_cache``\\ s);
* ``warm``: caches persist over the whole suite on both sides (verigym: its own caches;
  math-verify: its own caches plus a memo of ``parse()`` by string and of the verdict by
  (gold, pred), the equivalent of verigym's parse and result caches).

Goal (issue 17): verigym >= 10x math-verify's checks/s on every public suite, single process,
against every math-verify configuration; the script prints MET / NOT MET per suite and policy,
with the FP / FN table (verigym's FP and FN must not exceed math-verify's).

    PYTHONPATH=src .bench/venv/bin/python benchmarks/math_verifier.py [--suite FILE ...]
        [--policy cold|warm|both] [--chunk 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PUBLIC = ROOT.parent / "shared" / "benchmarks" / "verifier-suites"
DEFAULT_SUITES = [
    PUBLIC / "math-verify-tests.jsonl",
    PUBLIC / "hardverify-math.jsonl",
    ROOT / "tests" / "suites" / "math.jsonl",
    ROOT / "tests" / "suites" / "math_forms.jsonl",  # issue 27: the form the question demands
]
GOAL = 10.0  # issue 17: >= 10x math-verify's checks/s on every public suite, single process
_DELIMS = ("$", "\\boxed", "\\(", "\\[")

Check = Callable[[dict[str, Any]], bool]


class Side:
    """One grader configuration: a check, and how to clear its caches."""

    def __init__(self, name: str, check: Check, clear: Callable[[], None]) -> None:
        self.name, self.check, self.clear = name, check, clear
        self.verdicts: list[bool] = []
        self.wall = 0.0

    def run(self, lines: list[dict[str, Any]], cold: bool) -> float:
        """Check ``lines``; returns the seconds spent checking (cache clearing not counted)."""
        spent = 0.0
        for line in lines:
            if cold:
                self.clear()
            start = time.perf_counter()
            try:
                ok = bool(self.check(line))
            except Exception:  # an error never counts in the grader's favour
                ok = False
            spent += time.perf_counter() - start
            self.verdicts.append(ok)
        self.wall += spent
        return spent


def _verigym_side() -> Side:
    from verigym.graders.math import check_equivalent, clear_caches

    def check(line: dict[str, Any]) -> bool:
        verdict = check_equivalent(
            str(line["gold"]),
            str(line["pred"]),
            mode=str(line.get("mode") or "equivalent"),
            question=line.get("question"),
        )
        return verdict.accepted and verdict.error is None

    return Side("verigym", check, clear_caches)


def _mv_side(box_bare: bool, warm: bool) -> Side:
    from math_verify import parse, verify
    from math_verify import parser as mv_parser

    parsed: dict[str, Any] = {}
    verdicts: dict[tuple[str, str], bool] = {}

    def clear() -> None:
        for fn in (mv_parser.parse_latex_cached, mv_parser.parse_expr_cached, mv_parser.extract_latex):
            fn.cache_clear()
        parsed.clear()
        verdicts.clear()

    def parse_memo(s: str) -> Any:
        if not warm:
            return parse(s)
        if s not in parsed:
            parsed[s] = parse(s)
        return parsed[s]

    def check(line: dict[str, Any]) -> bool:
        gold, pred = str(line["gold"]), str(line["pred"])
        if not any(d in gold for d in _DELIMS):
            gold = f"${gold}$"
        if box_bare and not any(d in pred for d in _DELIMS):
            pred = "\\boxed{" + pred + "}"
        if warm and (gold, pred) in verdicts:
            return verdicts[(gold, pred)]
        ok = bool(verify(parse_memo(gold), parse_memo(pred)))
        if warm:
            verdicts[(gold, pred)] = ok
        return ok

    name = "math-verify (bare pred boxed)" if box_bare else "math-verify (pred as given)"
    return Side(name, check, clear)


def _rates(side: Side, labels: list[bool]) -> dict[str, Any]:
    pos = sum(labels)
    neg = len(labels) - pos
    fp = sum(v and not lab for v, lab in zip(side.verdicts, labels, strict=True))
    fn = sum(lab and not v for v, lab in zip(side.verdicts, labels, strict=True))
    return {
        "grader": side.name,
        "n": len(labels),
        "fp": fp,
        "fn": fn,
        "negatives": neg,
        "positives": pos,
        "fp_rate": fp / neg if neg else 0.0,
        "fn_rate": fn / pos if pos else 0.0,
        "accuracy": 1 - (fp + fn) / len(labels),
        "checks_per_s": len(labels) / side.wall if side.wall > 0 else 0.0,
    }


def bench_suite(path: Path, policy: str, chunk: int) -> dict[str, Any]:
    """All sides on one suite, alternating round by round; one ratio per round and peer."""
    lines = [json.loads(raw) for raw in path.read_text().splitlines() if raw.strip()]
    labels = [bool(line["label"]) for line in lines]
    cold = policy == "cold"
    sides = [_verigym_side(), _mv_side(False, not cold), _mv_side(True, not cold)]
    for side in sides:
        side.clear()  # every run starts from empty caches on every side
    ratios: dict[str, list[float]] = {s.name: [] for s in sides[1:]}
    for r, start in enumerate(range(0, len(lines), chunk)):
        part = lines[start : start + chunk]
        k = r % len(sides)
        spent = {s.name: s.run(part, cold) for s in sides[k:] + sides[:k]}
        ours = spent["verigym"]
        for peer in ratios:
            ratios[peer].append(spent[peer] / ours if ours > 0 else float("inf"))
    rows = [_rates(s, labels) for s in sides]
    peers = []
    for row in rows[1:]:
        rs = ratios[row["grader"]]
        overall = rows[0]["checks_per_s"] / row["checks_per_s"] if row["checks_per_s"] else float("inf")
        peers.append(
            {
                "grader": row["grader"],
                "median_ratio": statistics.median(rs),
                "min_ratio": min(rs),
                "max_ratio": max(rs),
                "overall_ratio": overall,
                "rounds": len(rs),
                "fp_not_higher": rows[0]["fp_rate"] <= row["fp_rate"],
                "fn_not_higher": rows[0]["fn_rate"] <= row["fn_rate"],
            }
        )
    met = all(p["median_ratio"] >= GOAL for p in peers)
    return {"suite": path.name, "policy": policy, "rows": rows, "peers": peers, "speed_goal_met": met}


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def _cpu() -> str:
    try:
        for raw in Path("/proc/cpuinfo").read_text().splitlines():
            if raw.startswith("model name"):
                return raw.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _print(res: dict[str, Any]) -> None:
    print(f"\n== {res['suite']}  (caches: {res['policy']}) ==")
    print(f"{'grader':32} {'n':>4} {'FP rate':>14} {'FN rate':>16} {'accuracy':>9} {'checks/s':>9}")
    for r in res["rows"]:
        fp = f"{r['fp_rate']:.1%} ({r['fp']}/{r['negatives']})"
        fn = f"{r['fn_rate']:.1%} ({r['fn']}/{r['positives']})"
        print(
            f"{r['grader']:32} {r['n']:>4} {fp:>14} {fn:>16} {r['accuracy']:>9.1%} {r['checks_per_s']:>9.1f}"
        )
    for p in res["peers"]:
        print(
            f"verigym / {p['grader']}: median ratio {p['median_ratio']:.2f}x over {p['rounds']} rounds "
            f"(min {p['min_ratio']:.2f}x, max {p['max_ratio']:.2f}x; whole suite {p['overall_ratio']:.2f}x); "
            f"FP not higher: {p['fp_not_higher']}, FN not higher: {p['fn_not_higher']}"
        )
    verdict = "MET" if res["speed_goal_met"] else "NOT MET"
    print(f"goal: median ratio >= {GOAL:g}x against every math-verify configuration: {verdict}")


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument(
        "--suite", action="append", type=Path, help="suite JSONL (repeatable; default: all three)"
    )
    ap.add_argument(
        "--policy", choices=("cold", "warm", "both"), default="both", help="cache policy (default both)"
    )
    ap.add_argument("--chunk", type=int, default=20, help="lines per round (default 20)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    suites = args.suite or DEFAULT_SUITES
    missing = [str(s) for s in suites if not s.exists()]
    if missing:
        sys.exit(f"error: no such suite: {', '.join(missing)}")
    if args.chunk < 1:
        sys.exit("error: --chunk must be at least 1")

    # Warm both sides outside the timed runs with the same checks (imports, sympy's first use of
    # each kind of expression, verigym's worker); caches are cleared later.
    from math_verify import parse, verify

    from verigym.graders.math import bench_warmup, check_equivalent, clear_caches
    from verigym.graders.math._sympy_path._worker import WARMUP

    bench_warmup()  # verigym's worker runs WARMUP when it starts; math-verify gets the same checks here
    for gold, pred in WARMUP:
        check_equivalent(gold, pred)
        verify(parse(f"${gold}$"), parse(f"${pred}$"))
    clear_caches()

    policies = ["cold", "warm"] if args.policy == "both" else [args.policy]
    header = {"cpu": _cpu(), "load_before": _load(), "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    results = []
    for s in suites:
        for pol in policies:
            res = bench_suite(s, pol, args.chunk)
            res["load_after"] = _load()
            results.append(res)
            if not args.json:
                _print(res)
                print(f"load average after: {res['load_after']}")
    public = [r for r in results if Path(r["suite"]).name in {p.name for p in DEFAULT_SUITES[:2]}]
    overall = bool(public) and all(r["speed_goal_met"] for r in public)
    if args.json:
        print(json.dumps({**header, "results": results, "goal": GOAL, "goal_met": overall}, indent=1))
        return
    print(f"\n{header['date']}  CPU: {header['cpu']}  load average before: {header['load_before']}")
    print(
        f"goal (>= {GOAL:g}x math-verify on every public suite, every cache policy):",
        "MET" if overall else "NOT MET",
    )


if __name__ == "__main__":
    main()
