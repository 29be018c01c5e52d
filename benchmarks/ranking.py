"""Relative ranking vs weighted-sum advantages on one multi-grader task (issue 16, item 2).

Task: ``arithmetic`` (2-digit addition) with ``graders="digits"``: three graders of weight ⅓ —
``length`` (right number of digits), ``last_digit`` (right ones digit) and ``correct`` (exact) —
so the rubric reward is their mean and a sample passes (reward ≥ 1) only when it passes ALL of
them. Each seed: the quickstart recipe's light SFT once (a fresh tiny model, 4,000 verified
demos, stopped at held-out 0.3), then from the same SFT weights the same DAPO RL with each
advantage mode: ``weighted`` (the rubric's weighted sum, the default), ``lexicographic``
(priority correct > last_digit > length) and ``pareto``. The arms run one after another within a
seed, their order rotated from seed to seed. Reported: held-out greedy pass of all graders
(200 test tasks) after SFT and after RL, and each grader's held-out mean after RL.

    python benchmarks/ranking.py --seeds 0-2 --steps 60

Target (the issue asks for a measurement, no number): MET when a ranking mode's mean held-out
all-pass after RL is at least the weighted sum's.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from learning import ci95, machine, parse_seeds

ARMS: dict[str, dict[str, Any]] = {
    "weighted": {},
    "lexicographic": {
        "rl__ranking": "lexicographic",
        "rl__ranking_priority": ["correct", "last_digit", "length"],
    },
    "pareto": {"rl__ranking": "pareto"},
}
GRADERS = ("correct", "last_digit", "length")


def one(job: dict[str, Any]) -> dict[str, Any]:
    import torch

    from verigym.recipes.quickstart import learning_run, quickstart_config

    torch.set_num_threads(1)
    over: dict[str, Any] = {
        "envs": [{"name": "arithmetic", "args": {"level": 1, "graders": "digits"}}],
        "rl__steps": job["steps"],
        **ARMS[job["arm"]],
    }
    out = Path(job["out"]) / f"{job['arm']}-{job['seed']}"
    cfg = quickstart_config(out, seed=job["seed"], **over)
    cache = Path(job["cache"]) / f"sft-{job['seed']}.pt"
    result = learning_run(cfg, control=False, sft_cache=cache)
    last = [json.loads(x) for x in (out / "rl" / "metrics.jsonl").read_text().splitlines()][-1]
    result["arm"] = job["arm"]
    for g in GRADERS:
        result[g] = last.get(f"eval/arithmetic/grader/{g}", float("nan"))
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0-2")
    ap.add_argument("--steps", type=int, default=60, help="RL steps per arm")
    ap.add_argument("--jobs", type=int, default=1, help="processes (one torch thread each)")
    ap.add_argument("--out", type=Path, default=Path("runs/bench_ranking"))
    ap.add_argument("--cache", type=Path, default=Path("runs/bench_sft"), help="per-seed SFT weights")
    args = ap.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    seeds = parse_seeds(args.seeds)
    arms = list(ARMS)
    # the first arm of each seed writes its SFT weights; the rotated rest start from them
    first = [
        {"seed": s, "arm": arms[i % 3], "steps": args.steps, "out": str(args.out), "cache": str(args.cache)}
        for i, s in enumerate(seeds)
    ]
    rest = [
        {
            "seed": s,
            "arm": arms[(i + k) % 3],
            "steps": args.steps,
            "out": str(args.out),
            "cache": str(args.cache),
        }
        for k in (1, 2)
        for i, s in enumerate(seeds)
    ]
    rows: list[dict[str, Any]] = []
    with mp.get_context("spawn").Pool(args.jobs) as pool:
        for stage in (first, rest):
            for r in pool.imap(one, stage):
                rows.append(r)
                print(json.dumps(r), flush=True)
    print(machine(), "· load", os.getloadavg())
    print(f"seeds {args.seeds}, {args.steps} RL steps (DAPO, 16 groups x 8), held-out 200 tasks greedy")
    print("| arm | seed | after SFT | after RL (all graders) | correct | last_digit | length |")
    print("|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: (arms.index(r["arm"]), r["seed"])):
        print(
            f"| {r['arm']} | {r['seed']} | {r['after_sft']:.3f} | {r['after_rl']:.3f} | "
            + " | ".join(f"{r[g]:.3f}" for g in GRADERS)
            + " |"
        )
    means = {}
    for arm in arms:
        mine = [r["after_rl"] for r in rows if r["arm"] == arm]
        mean, half = ci95(mine)
        means[arm] = mean
        lift = statistics.fmean(r["lift"] for r in rows if r["arm"] == arm)
        print(
            f"{arm}: held-out all-pass after RL {mean:.3f} ± {half:.3f} (95% CI, n={len(mine)}); lift {lift:+.3f}"
        )
    for arm in ("lexicographic", "pareto"):
        ok = means[arm] >= means["weighted"]
        print(f"{arm} ≥ weighted sum: {'MET' if ok else 'NOT MET'} ({means[arm] - means['weighted']:+.3f})")


if __name__ == "__main__":
    main()
