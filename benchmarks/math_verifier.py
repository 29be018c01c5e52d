"""verigym's math grader vs math-verify 0.9, side by side on the same labeled suites.

Suites: the two public files in ``../shared/benchmarks/verifier-suites/`` (math-verify's own test
cases, TinyV's HardVerify-Math) and verigym's ``tests/suites/math.jsonl``. For each suite it runs

* verigym: ``check_equivalent(gold, pred, mode=line.mode, question=line.question)`` through the
  worker process with the default hard timeout (the worker is started before timing);
* math-verify with library defaults, one thread, the rule of the suites' README: gold wrapped in
  ``$...$`` unless it has ``$``, ``\\boxed``, ``\\(`` or ``\\[``; the prediction as given, and a
  second configuration with a bare prediction (no delimiters) wrapped in ``\\boxed{}``.
  math-verify has no strictness modes: it compares every line as "equivalent" (lines with a mode
  count against it; that is what a user of it gets).

The graders run interleaved in chunks of 20 lines (a busy machine slows all of them alike).
Prints FP rate, FN rate, accuracy and checks/s for each, the ratios verigym / math-verify, and
whether verigym meets the target: FP and FN strictly lower than every math-verify configuration,
checks/s at least that of the fastest one.

    python benchmarks/math_verifier.py [--suite FILE ...] [--json]
"""

from __future__ import annotations

import argparse
import json
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
]
_DELIMS = ("$", "\\boxed", "\\(", "\\[")


def _rates(name: str, labels: list[bool], verdicts: list[bool], wall: float) -> dict[str, Any]:
    pos = sum(labels)
    neg = len(labels) - pos
    fp = sum(v and not lab for v, lab in zip(verdicts, labels, strict=True))
    fn = sum(lab and not v for v, lab in zip(verdicts, labels, strict=True))
    return {
        "grader": name,
        "n": len(labels),
        "fp": fp,
        "fn": fn,
        "fp_rate": fp / neg if neg else 0.0,
        "fn_rate": fn / pos if pos else 0.0,
        "accuracy": 1 - (fp + fn) / len(labels),
        "checks_per_s": len(labels) / wall if wall > 0 else 0.0,
        "negatives": neg,
        "positives": pos,
    }


def _time(fn: Callable[[dict[str, Any]], bool], lines: list[dict[str, Any]]) -> tuple[list[bool], float]:
    start = time.perf_counter()
    out = []
    for line in lines:
        try:
            out.append(bool(fn(line)))
        except Exception:  # an error never counts in the grader's favour
            out.append(False)
    return out, time.perf_counter() - start


def _verigym(line: dict[str, Any]) -> bool:
    from verigym.graders.math import check_equivalent

    verdict = check_equivalent(
        str(line["gold"]),
        str(line["pred"]),
        mode=str(line.get("mode") or "equivalent"),
        question=line.get("question"),
    )
    return verdict.accepted and verdict.error is None


def _mv(box_bare: bool) -> Callable[[dict[str, Any]], bool]:
    from math_verify import parse, verify

    def run(line: dict[str, Any]) -> bool:
        gold, pred = str(line["gold"]), str(line["pred"])
        if not any(d in gold for d in _DELIMS):
            gold = f"${gold}$"
        if box_bare and not any(d in pred for d in _DELIMS):
            pred = "\\boxed{" + pred + "}"
        return bool(verify(parse(gold), parse(pred)))

    return run


def bench_suite(path: Path, chunk: int = 20) -> dict[str, Any]:
    """All graders on one suite, interleaved in chunks of ``chunk`` lines so that a change in
    machine load during the run hits every grader alike."""
    lines = [json.loads(raw) for raw in path.read_text().splitlines() if raw.strip()]
    labels = [bool(line["label"]) for line in lines]
    graders: list[tuple[str, Callable[[dict[str, Any]], bool]]] = [
        ("verigym", _verigym),
        ("math-verify (pred as given)", _mv(False)),
        ("math-verify (bare pred boxed)", _mv(True)),
    ]
    verdicts: dict[str, list[bool]] = {name: [] for name, _ in graders}
    walls = dict.fromkeys(verdicts, 0.0)
    for start in range(0, len(lines), chunk):
        part = lines[start : start + chunk]
        for name, fn in graders:
            got, wall = _time(fn, part)
            verdicts[name] += got
            walls[name] += wall
    rows = [_rates(name, labels, verdicts[name], walls[name]) for name, _ in graders]
    ours, peers = rows[0], rows[1:]
    met = (
        all(ours["fp_rate"] < p["fp_rate"] or (ours["fp"] == 0 and p["negatives"] == 0) for p in peers)
        and all(ours["fn_rate"] < p["fn_rate"] for p in peers)
        and ours["checks_per_s"] >= max(p["checks_per_s"] for p in peers)
    )
    return {"suite": path.name, "rows": rows, "target_met": met}


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else ("0" if a == 0 else "inf")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--suite", action="append", type=Path, help="suite JSONL (repeatable; default: all three)"
    )
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    suites = args.suite or DEFAULT_SUITES
    missing = [str(s) for s in suites if not s.exists()]
    if missing:
        sys.exit(f"error: no such suite: {', '.join(missing)}")

    # Warm both sides outside the timed runs: imports, the worker process, parser caches of neither.
    from math_verify import parse, verify

    from verigym.graders.math import bench_warmup

    bench_warmup()
    verify(parse("$1$"), parse("$1$"))

    results = [bench_suite(s) for s in suites]
    if args.json:
        print(json.dumps(results, indent=1))
        return
    for res in results:
        print(f"\n== {res['suite']} ==")
        print(f"{'grader':32} {'n':>4} {'FP rate':>14} {'FN rate':>16} {'accuracy':>9} {'checks/s':>9}")
        for r in res["rows"]:
            fp = f"{r['fp_rate']:.1%} ({r['fp']}/{r['negatives']})"
            fn = f"{r['fn_rate']:.1%} ({r['fn']}/{r['positives']})"
            print(
                f"{r['grader']:32} {r['n']:>4} {fp:>14} {fn:>16} {r['accuracy']:>9.1%} {r['checks_per_s']:>9.1f}"
            )
        ours = res["rows"][0]
        for peer in res["rows"][1:]:
            print(
                f"verigym / {peer['grader']}: FP {_ratio(ours['fp_rate'], peer['fp_rate'])}, "
                f"FN {_ratio(ours['fn_rate'], peer['fn_rate'])}, "
                f"throughput {_ratio(ours['checks_per_s'], peer['checks_per_s'])}"
            )
        print(
            "target (FP and FN strictly lower, checks/s >= fastest peer):",
            "MET" if res["target_met"] else "NOT MET",
        )


if __name__ == "__main__":
    main()
