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
that goes first rotates every round). The figure against the goal is the **whole-suite ratio**:
math-verify's total checking time over verigym's on the same lines (total checks / total time on
each side, what a user's run sees, slow tail lines included). Each round also gives one ratio per
configuration, and their median is printed beside it as an extra column (it hides the tail, so
it is not the verdict). Both sides get the same inputs, and caches are handled the same way on
both sides, in two policies reported side by side:

* ``cold``: every cache is cleared before every line (verigym: its result cache and parse caches,
  in this process and in its workers; math-verify: its parser's ``lru_cache``\\ s);
* ``warm``: caches persist over the whole suite on both sides (verigym: its own caches;
  math-verify: its own caches plus a memo of ``parse()`` by string and of the verdict by
  (gold, pred), the equivalent of verigym's parse and result caches).

Goal (issue 17, made whole-suite by issue 43 item 5): verigym >= 10x math-verify's checks/s on
every suite the script runs, both cache policies, single process, against every math-verify
configuration, judged on the whole-suite ratio; the script prints MET / NOT MET per suite and
policy, a summary table, the final verdict over all of them, and the FP / FN table (verigym's FP
and FN must not exceed math-verify's).

``--busy N`` starts N CPU-bound processes (a bare Python loop each) beside the run and stops
them at the end: the "with another CPU-bound process beside it" figure of issue 43 item 5.

Each suite's block also gives the CPU seconds of each side (verigym's worker process apart, with
the time it waited for a CPU), and ``--dump FILE`` writes verigym's verdict, reason and extracted
answer for every line (nothing timed), so two code versions can be compared line by line.

    PYTHONPATH=src .bench/venv/bin/python benchmarks/math_verifier.py [--suite FILE ...]
        [--policy cold|warm|both] [--chunk 20] [--busy 0] [--json] [--dump FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
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
GOAL = 10.0  # issues 17 and 43: >= 10x math-verify's checks/s, whole suite, on every suite run
_DELIMS = ("$", "\\boxed", "\\(", "\\[")

Check = Callable[[dict[str, Any]], bool]


class Side:
    """One grader configuration: a check, and how to clear its caches."""

    def __init__(self, name: str, check: Check, clear: Callable[[], None]) -> None:
        self.name, self.check, self.clear = name, check, clear
        self.verdicts: list[bool] = []
        self.wall = 0.0
        self.cpu = 0.0  # this thread's CPU seconds in the timed checks (verigym's worker: _worker_cpu)

    def run(self, lines: list[dict[str, Any]], cold: bool) -> float:
        """Check ``lines``; returns the seconds spent checking (cache clearing not counted)."""
        spent = 0.0
        for line in lines:
            if cold:
                self.clear()
            start, cpu = time.perf_counter(), time.thread_time()
            try:
                ok = bool(self.check(line))
            except Exception:  # an error never counts in the grader's favour
                ok = False
            spent += time.perf_counter() - start
            self.cpu += time.thread_time() - cpu
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
    return (
        {"grader": side.name, "n": len(labels), "fp": fp, "fn": fn, "negatives": neg, "positives": pos}
        | {"fp_rate": fp / neg if neg else 0.0, "fn_rate": fn / pos if pos else 0.0}
        | {"accuracy": 1 - (fp + fn) / len(labels), "cpu_s": side.cpu}
        | {"checks_per_s": len(labels) / side.wall if side.wall > 0 else 0.0}
    )


def _worker_cpu() -> tuple[float, float]:
    """verigym's worker processes: (seconds on a CPU, seconds runnable but waiting for one), from
    Linux's /proc/PID/schedstat; (0, 0) elsewhere."""
    from verigym.graders.math._sympy_path._worker import default_pool

    on = wait = 0.0
    for w in list(default_pool()._idle):
        try:
            fields = Path(f"/proc/{w.proc.pid}/schedstat").read_text().split()
        except OSError:
            continue
        on, wait = on + int(fields[0]) / 1e9, wait + int(fields[1]) / 1e9
    return on, wait


def bench_suite(path: Path, policy: str, chunk: int) -> dict[str, Any]:
    """All sides on one suite, alternating round by round; one ratio per round and peer."""
    lines = [json.loads(raw) for raw in path.read_text().splitlines() if raw.strip()]
    labels = [bool(line["label"]) for line in lines]
    cold = policy == "cold"
    sides = [_verigym_side(), _mv_side(False, not cold), _mv_side(True, not cold)]
    for side in sides:
        side.clear()  # every run starts from empty caches on every side
    ratios: dict[str, list[float]] = {s.name: [] for s in sides[1:]}
    worker0 = _worker_cpu()
    for r, start in enumerate(range(0, len(lines), chunk)):
        part = lines[start : start + chunk]
        k = r % len(sides)
        spent = {s.name: s.run(part, cold) for s in sides[k:] + sides[:k]}
        ours = spent["verigym"]
        for peer in ratios:
            ratios[peer].append(spent[peer] / ours if ours > 0 else float("inf"))
    worker1 = _worker_cpu()
    rows = [_rates(s, labels) for s in sides]
    rows[0]["worker_cpu_s"], rows[0]["worker_wait_s"] = (b - a for a, b in zip(worker0, worker1, strict=True))
    peers = []
    for row in rows[1:]:
        rs = ratios[row["grader"]]
        overall = rows[0]["checks_per_s"] / row["checks_per_s"] if row["checks_per_s"] else float("inf")
        peers.append(
            {"grader": row["grader"], "median_ratio": statistics.median(rs), "min_ratio": min(rs)}
            | {"max_ratio": max(rs), "overall_ratio": overall, "rounds": len(rs)}
            | {"fp_not_higher": rows[0]["fp_rate"] <= row["fp_rate"]}
            | {"fn_not_higher": rows[0]["fn_rate"] <= row["fn_rate"]}
        )
    met = all(p["overall_ratio"] >= GOAL for p in peers)  # the whole-suite ratio decides
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
            f"verigym / {p['grader']}: whole suite {p['overall_ratio']:.2f}x (median of {p['rounds']} "
            f"rounds {p['median_ratio']:.2f}x, min {p['min_ratio']:.2f}x, max {p['max_ratio']:.2f}x); "
            f"FP not higher: {p['fp_not_higher']}, FN not higher: {p['fn_not_higher']}"
        )
    ours, given, boxed = res["rows"]
    print(
        f"CPU seconds: verigym {ours['cpu_s']:.3f} (its worker {ours['worker_cpu_s']:.3f} on a CPU, "
        f"{ours['worker_wait_s']:.3f} waiting for one; cold: with its cache clearing), math-verify "
        f"{given['cpu_s']:.3f} (pred as given) / {boxed['cpu_s']:.3f} (bare pred boxed)"
    )
    verdict = "MET" if res["speed_goal_met"] else "NOT MET"
    print(f"goal: whole-suite ratio >= {GOAL:g}x against every math-verify configuration: {verdict}")


def _summary(results: list[dict[str, Any]]) -> None:
    """One row per suite and cache policy: the whole-suite ratios (the verdict) and the medians."""
    print(
        f"\n{'suite':26} {'caches':6} {'whole suite vs given / boxed':>29} {'median vs given / boxed':>24}  verdict"
    )
    for r in results:
        a, b = r["peers"]
        whole = f"{a['overall_ratio']:.2f}x / {b['overall_ratio']:.2f}x"
        med = f"{a['median_ratio']:.2f}x / {b['median_ratio']:.2f}x"
        verdict = "MET" if r["speed_goal_met"] else "NOT MET"
        print(
            f"{r['suite']:26} {r['policy']:6} {whole:>29} {med:>24}  {verdict}  (load after {r['load_after']})"
        )


def _spinners(n: int) -> list[subprocess.Popen[bytes]]:
    """``n`` CPU-bound processes (stopped by the caller)."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--suite", action="append", type=Path, help="suite JSONL (repeatable; default: all four)")
    ap.add_argument("--policy", choices=("cold", "warm", "both"), default="both", help="cache policy")
    ap.add_argument("--chunk", type=int, default=20, help="lines per round (default 20)")
    ap.add_argument("--busy", type=int, default=0, help="CPU-bound processes to run beside the benchmark")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument(
        "--dump",
        type=Path,
        help="write verigym's verdict, reason and extracted answer for every suite line to this JSONL "
        "file (caches cleared before each line; to compare code versions) and time nothing",
    )
    args = ap.parse_args()
    suites = args.suite or DEFAULT_SUITES
    missing = [str(s) for s in suites if not s.exists()]
    if missing:
        sys.exit(f"error: no such suite: {', '.join(missing)}")
    if args.chunk < 1:
        sys.exit("error: --chunk must be at least 1")
    if args.busy < 0:
        sys.exit("error: --busy must be 0 or more")
    if args.dump is not None:
        _dump(suites, args.dump)
        return
    spinners = _spinners(args.busy)
    try:
        _run(suites, args.policy, args.chunk, args.busy, args.json)
    finally:
        for proc in spinners:
            proc.kill()
            proc.wait()


def _dump(suites: list[Path], out: Path) -> None:
    """One JSON line per suite line: verigym's whole verdict, for before/after comparisons."""
    from verigym.graders.math import check_equivalent, clear_caches

    rows = []
    for path in suites:
        for i, raw in enumerate(path.read_text().splitlines()):
            if raw.strip():
                line = json.loads(raw)
                clear_caches()
                v = check_equivalent(
                    str(line["gold"]),
                    str(line["pred"]),
                    mode=str(line.get("mode") or "equivalent"),
                    question=line.get("question"),
                )
                rows.append({"suite": path.name, "line": i, **{k: getattr(v, k) for k in _VERDICT}})
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"{len(rows)} lines written to {out}")


_VERDICT = ("accepted", "reason", "extracted", "error")


def _run(suites: list[Path], policy: str, chunk: int, busy: int, as_json: bool) -> None:
    """Warm both sides, run every suite under every policy, print the tables and the verdict."""
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

    policies = ["cold", "warm"] if policy == "both" else [policy]
    header = {
        "cpu": _cpu(),
        "load_before": _load(),
        "busy": busy,
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    results = []
    for s in suites:
        for pol in policies:
            res = bench_suite(s, pol, chunk)
            res["load_after"] = _load()
            results.append(res)
            if not as_json:
                _print(res)
                print(f"load average after: {res['load_after']}")
    overall = bool(results) and all(r["speed_goal_met"] for r in results)
    slowest = min(
        ((p["overall_ratio"], r["suite"], r["policy"], p["grader"]) for r in results for p in r["peers"]),
        default=None,
    )
    if as_json:
        worst = (
            None
            if slowest is None
            else dict(zip(("ratio", "suite", "policy", "grader"), slowest, strict=True))
        )
        print(
            json.dumps(
                {**header, "results": results, "goal": GOAL, "goal_met": overall, "slowest": worst}, indent=1
            )
        )
        return
    _summary(results)
    print(
        f"\n{header['date']}  CPU: {header['cpu']}  load average before: {header['load_before']}"
        f"  CPU-bound processes beside it: {busy}"
    )
    if slowest is not None:
        print(f"slowest whole-suite ratio: {slowest[0]:.2f}x ({slowest[1]}, {slowest[2]}, vs {slowest[3]})")
    print(
        f"goal (whole-suite ratio >= {GOAL:g}x math-verify on every suite run, every cache policy):",
        "MET" if overall else "NOT MET",
    )


if __name__ == "__main__":
    main()
