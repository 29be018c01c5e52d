"""verigym's BFCL-mode tool-call grader vs bfcl-eval's official ``ast_checker``, side by side.

Data: bfcl-eval's shipped Python AST categories (simple_python 400, multiple 200, parallel 200,
parallel_multiple 200 questions with ``possible_answer``). bfcl-eval is read from
``.bench/venv`` without its dependency tree (it pins numpy 1.26 and pulls sentence-transformers,
hence another torch): ``pip install --no-deps bfcl-eval``; its checker module is imported with
stand-ins for the two modules it needs only for Java/JS and model-name mapping.

Candidates per question (each graded by both, sides alternating in chunks of 50):

* ``gold``: every expected call with the first allowed value of each parameter (target: 100% of
  them accepted by verigym);
* ``alt``: the last allowed value instead (still correct);
* ``reorder`` (parallel): the gold calls in reverse order (BFCL is order-free: correct);
* ``punct``: a string value with its punctuation and case changed ("Seattle, WA" → "SEATTLE WA"):
  BFCL's documented normalisation accepts it;
* wrong ones: ``name`` (another function name), ``drop`` (a required parameter missing),
  ``extra`` (an unexpected parameter), ``value`` (a changed value), ``type`` (a number given as
  a string), ``missing_call`` / ``extra_call`` (parallel).

Prints agreement %, every disagreement grouped by kind and direction with an example and its
classification (official right / verigym right / ambiguous), and time per check for both.

    .venv/bin/python benchmarks/agreement_bfcl.py [--per-category N] [--json]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import time
import types
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH_SITE = next((ROOT / ".bench" / "venv" / "lib").glob("python3*/site-packages"), None)
CATEGORIES = {
    "simple": ("BFCL_v4_simple_python.json", "simple"),
    "multiple": ("BFCL_v4_multiple.json", "multiple"),
    "parallel": ("BFCL_v4_parallel.json", "parallel"),
    "parallel_multiple": ("BFCL_v4_parallel_multiple.json", "parallel_multiple"),
}
# Disagreements seen on bfcl-eval 2026.3.23, classified by hand: (kind, direction) -> (who, why).
# direction "bfcl_only" = BFCL accepts, verigym rejects; "verigym_only" the reverse.
CLASSIFIED: dict[tuple[str, str], tuple[str, str]] = {
    ("reorder", "verigym_only"): (
        "verigym right",
        "BFCL's order-free parallel check assigns each expected call greedily to the first model "
        "call that fits, so a correct set of calls in another order can fail; verigym finds a "
        "full bipartite matching",
    ),
}


def _official() -> Callable[..., dict[str, Any]]:
    """bfcl-eval's ``ast_checker`` without its dependency tree."""
    if BENCH_SITE is not None and str(BENCH_SITE) not in sys.path:
        sys.path.append(str(BENCH_SITE))

    class _Cfg:
        underscore_to_dot = False

    stubs: dict[str, dict[str, Any]] = {
        "bfcl_eval.constants.model_config": {"MODEL_CONFIG_MAPPING": defaultdict(_Cfg)},
        "bfcl_eval.eval_checker.ast_eval.type_convertor.java_type_converter": {"java_type_converter": None},
        "bfcl_eval.eval_checker.ast_eval.type_convertor.js_type_converter": {"js_type_converter": None},
    }
    for name, attrs in stubs.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        sys.modules[name] = module
    from bfcl_eval.constants.enums import Language
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker

    def check(docs: list[Any], calls: list[dict[str, Any]], answers: list[Any], category: str) -> bool:
        return bool(ast_checker(docs, calls, answers, Language.PYTHON, category, "bench")["valid"])

    return check


def _resolve(value: Any, last: bool) -> Any:
    """A concrete value from BFCL's nested answer form (a dict maps keys to allowed lists)."""
    if isinstance(value, dict):
        out = {}
        for key, options in value.items():
            chosen = [o for o in options if o != ""] if isinstance(options, list) else [options]
            if chosen:
                out[key] = _resolve(chosen[-1] if last else chosen[0], last)
        return out
    if isinstance(value, list):
        return [_resolve(v, last) for v in value]
    return value


def _gold(answers: list[dict[str, Any]], docs: dict[str, Any], last: bool = False) -> list[dict[str, Any]]:
    """``last=False``: optional parameters omitted (unless the doc requires them), first allowed
    values; ``True``: every parameter the doc declares with a value, the last allowed one."""
    out = []
    for answer in answers:
        ((name, params),) = answer.items()
        schema = docs[name]["parameters"]
        props, required = schema.get("properties", {}), schema.get("required", [])
        args = {}
        for key, options in params.items():
            chosen = [o for o in options if o != ""]
            wanted = key in required or ((last or "" not in options) and key in props)
            if chosen and wanted:
                args[key] = _resolve(chosen[-1] if last else chosen[0], last)
        out.append({name: args})
    return out


def _punct(text: str) -> str:
    changed = text.replace(", ", " ").replace(",", " ").replace(".", "").replace("-", " ")
    return changed.upper() if changed == text else changed


def _change(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 7
    if isinstance(value, str):
        return value + " zz"
    if isinstance(value, list):
        return value[:-1] if value else ["zz"]
    if isinstance(value, dict):
        return {**value, "zz_extra": 1}
    return "zz"


def candidates(
    q: dict[str, Any], answers: list[dict[str, Any]], category: str
) -> list[tuple[str, list[Any]]]:
    docs = {d["name"]: d for d in q["function"]}
    gold = _gold(answers, docs)
    out: list[tuple[str, list[Any]]] = [("gold", gold)]
    alt = _gold(answers, docs, last=True)
    if alt != gold:
        out.append(("alt", alt))
    if len(gold) > 1:
        out.append(("reorder", list(reversed(gold))))
        out.append(("missing_call", gold[:-1]))
    out.append(("extra_call", [*gold, copy.deepcopy(gold[0])]))
    ((name, args),) = gold[0].items()
    others = [n for n in docs if n != name]
    out.append(("name", [{others[0] if others else name + "_v2": args}, *gold[1:]]))
    required = docs[name]["parameters"].get("required", [])
    if required and required[0] in args:
        out.append(("drop", [{name: {k: v for k, v in args.items() if k != required[0]}}, *gold[1:]]))
    out.append(("extra", [{name: {**args, "zz_unexpected": 1}}, *gold[1:]]))
    for key, value in args.items():
        out.append(("value", [{name: {**args, key: _change(value)}}, *gold[1:]]))
        break
    for key, value in args.items():
        if isinstance(value, str) and _punct(value) != value:
            out.append(("punct", [{name: {**args, key: _punct(value)}}, *gold[1:]]))
            break
    for key, value in args.items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            out.append(("type", [{name: {**args, key: str(value)}}, *gold[1:]]))
            break
    return out


def _verigym() -> Callable[..., bool]:
    sys.path.insert(0, str(ROOT / "src"))
    from verigym.graders.toolcall import match_any

    def check(prepared: tuple[Any, Any, Any]) -> bool:
        made, gold, fns = prepared
        return match_any(made, gold, fns, strings="bfcl").ok

    return check


def _prepare_verigym(
    docs: list[Any], calls: list[dict[str, Any]], answers: list[Any]
) -> tuple[Any, Any, Any]:
    """What the bfcl environment holds in ``Task.info`` (safe names) and the calls as parsed."""
    from verigym.envs.builtin.bfcl import safe_name
    from verigym.graders.toolcall import Call

    fns = [{**d, "name": safe_name(d["name"])} for d in docs]
    gold = [{safe_name(n): p for n, p in a.items()} for a in answers]
    made = [Call(safe_name(n), a) for c in calls for n, a in c.items()]
    return made, gold, fns


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-category", type=int, default=0, help="questions per category (0: all)")
    ap.add_argument("--chunk", type=int, default=50, help="checks per side before switching sides")
    ap.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = ap.parse_args()
    official, ours = _official(), _verigym()
    data = Path(next(p for p in sys.path if (Path(p) / "bfcl_eval").is_dir())) / "bfcl_eval" / "data"
    items: list[tuple[str, str, str, list[Any], list[Any], list[Any]]] = []
    for cat, (fname, official_cat) in CATEGORIES.items():
        qs = [json.loads(line) for line in (data / fname).read_text().splitlines() if line.strip()]
        ans = {
            r["id"]: r["ground_truth"]
            for r in map(json.loads, (data / "possible_answer" / fname).read_text().splitlines())
        }
        for q in qs[: args.per_category or None]:
            for kind, calls in candidates(q, ans[q["id"]], cat):
                items.append((q["id"], kind, official_cat, q["function"], calls, ans[q["id"]]))
    verdicts: dict[str, list[bool]] = {"bfcl": [], "verigym": []}
    wall = {"bfcl": 0.0, "verigym": 0.0}
    for start in range(0, len(items), args.chunk):
        chunk = items[start : start + args.chunk]
        order = [("bfcl", official), ("verigym", ours)]
        if (start // args.chunk) % 2:
            order.reverse()
        for side, _fn in order:  # inputs prepared outside the timed region
            if side == "bfcl":
                args_list = [(d, copy.deepcopy(c), a, oc) for _, _, oc, d, c, a in chunk]
                t0 = time.perf_counter()
                verdicts[side].extend(official(*x) for x in args_list)
            else:
                prepared = [_prepare_verigym(d, c, a) for _, _, _, d, c, a in chunk]
                t0 = time.perf_counter()
                verdicts[side].extend(ours(x) for x in prepared)
            wall[side] += time.perf_counter() - t0
    gold_ok = [v for v, it in zip(verdicts["verigym"], items, strict=True) if it[1] == "gold"]
    agree = sum(a == b for a, b in zip(verdicts["bfcl"], verdicts["verigym"], strict=True))
    groups: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for it, b, v in zip(items, verdicts["bfcl"], verdicts["verigym"], strict=True):
        if b != v:
            groups[(it[1], "bfcl_only" if b else "verigym_only")].append(it)
    explained = sum(len(v) for k, v in groups.items() if CLASSIFIED.get(k, ("",))[0] == "verigym right")
    n = len(items)
    summary = {
        "checks": n,
        "kinds": dict(Counter(it[1] for it in items)),
        "agreement": agree / n,
        "agreement_excl_official_wrong": (agree + explained) / n,
        "gold_accepted": f"{sum(gold_ok)}/{len(gold_ok)}",
        "bfcl_us_per_check": 1e6 * wall["bfcl"] / n,
        "verigym_us_per_check": 1e6 * wall["verigym"] / n,
        "load": os.getloadavg()[0],
        "disagreements": {
            f"{k}/{d}": {
                "count": len(v),
                "class": CLASSIFIED.get((k, d), ("unclassified", ""))[0],
                "why": CLASSIFIED.get((k, d), ("", ""))[1],
                "example": {"id": v[0][0], "calls": v[0][4], "answers": v[0][5]},
            }
            for (k, d), v in sorted(groups.items())
        },
    }
    if args.json:
        print(json.dumps(summary, indent=1, default=str))
        return
    print(f"checks {n} ({summary['kinds']}); load {summary['load']:.2f}")
    print(f"agreement {100 * summary['agreement']:.2f}%  "
          f"(counting 'verigym right' as agreeing: {100 * summary['agreement_excl_official_wrong']:.2f}%)")  # fmt: skip
    print(f"gold accepted by verigym: {summary['gold_accepted']}")
    for key, d in summary["disagreements"].items():
        print(f"  {key}: {d['count']} [{d['class']}] {d['why']}\n    e.g. {json.dumps(d['example'])[:400]}")
    ratio = summary["verigym_us_per_check"] / summary["bfcl_us_per_check"]
    print(f"time per check: bfcl {summary['bfcl_us_per_check']:.1f} us, verigym "
          f"{summary['verigym_us_per_check']:.1f} us (ratio {ratio:.2f})")  # fmt: skip
    gold_met = gold_ok and all(gold_ok)
    agree_met = summary["agreement_excl_official_wrong"] >= 0.99
    print(f"target 100% gold accepted: {'MET' if gold_met else 'NOT MET'}; "
          f"target >= 99% agreement (official-wrong cases excepted): {'MET' if agree_met else 'NOT MET'}")  # fmt: skip


if __name__ == "__main__":
    main()
