"""Exploration in training groups vs plain groups (issue 16, item 5).

Each seed: the quickstart recipe's light SFT once (fresh tiny model, 4,000 verified 2-digit
addition demos, stopped at held-out 0.3), then from the same SFT weights the same DAPO RL with:

- ``plain``: every sample of a group sees the task as is (the quickstart);
- ``rewrite``: 4 of the 8 samples see a rewritten prompt (``rl.group_variants.rewrite = 4``,
  rule rewrites: the operands commuted, ``34+12=`` for ``12+34=``);
- ``guide``: 2 of the 8 see a guiding sentence before the task (``group_variants.guide = 2``,
  the default guides);
- ``noise``: parameter-space noise on the sampler's weights, σ = 0.3·std(W) annealed linearly to
  0 over the run (``rl.param_noise = [[0, 0.3], [STEPS, 0.0]]``; at 0.3 the SFT model's sampled
  pass@1 is unchanged, 0.165 → 0.17 on seed 0, at 2.0 its greedy pass@1 falls 0.435 → 0).

The arms of a seed run one after another, their order rotated from seed to seed. Reported per
arm: the fraction of sampled groups whose rewards are all equal (``frac_groups_flat``, mean over
the steps; those groups give zero advantage) and held-out greedy pass@1 (200 test tasks, plain
prompts) after RL.

    python benchmarks/exploration.py --seeds 0-2 --steps 60
    python benchmarks/exploration.py --calibrate 0      # pass@1 of seed 0's SFT model under noise σ

Target (the issue asks for a measurement): MET when an arm lowers the zero-variance fraction
below plain's without lowering mean held-out pass@1 by more than 0.02.
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


def arms(steps: int) -> dict[str, dict[str, Any]]:
    return {
        "plain": {},
        "rewrite": {"rl__group_variants": {"rewrite": 4}},
        "guide": {"rl__group_variants": {"guide": 2}},
        "noise": {"rl__param_noise": [[0, 0.3], [steps, 0.0]]},
    }


def one(job: dict[str, Any]) -> dict[str, Any]:
    import torch

    from verigym.recipes.quickstart import learning_run, quickstart_config

    torch.set_num_threads(1)
    over = {"rl__steps": job["steps"], **arms(job["steps"])[job["arm"]]}
    out = Path(job["out"]) / f"{job['arm']}-{job['seed']}"
    cfg = quickstart_config(out, seed=job["seed"], **over)
    result = learning_run(cfg, control=False, sft_cache=Path(job["cache"]) / f"sft-{job['seed']}.pt")
    steps = [json.loads(x) for x in (out / "rl" / "metrics.jsonl").read_text().splitlines()]
    steps = [s for s in steps if s.get("phase") == "rl"]
    result["arm"] = job["arm"]
    result["flat"] = statistics.fmean(s["frac_groups_flat"] for s in steps)
    result["pass_rate_train"] = statistics.fmean(s["pass_rate"] for s in steps)
    variants: dict[str, list[float]] = {}
    for s in steps:
        for k, v in s.items():
            if k.startswith("variant/") and k.endswith("/pass_rate"):
                variants.setdefault(k.split("/")[1], []).append(v)
    result["variant_pass"] = {k: statistics.fmean(v) for k, v in variants.items()}
    return result


def calibrate(seed: int, cache: Path) -> None:
    """Held-out pass@1 of the cached SFT model of ``seed`` with its weights under noise σ, sampled at
    T=1 and greedy: how much each σ perturbs the sampler (needs the SFT cache of a benchmark run)."""
    import torch

    from verigym.recipes.quickstart import quickstart_config
    from verigym.train import load_model
    from verigym.train.exploration import parameter_noise
    from verigym.train.rl import RLTrainer, load_envs

    torch.set_num_threads(1)
    for temperature in (1.0, 0.0):
        cfg = quickstart_config(cache / "calibrate", seed=seed, eval__temperature=temperature)
        model, tok = load_model(cfg.model)
        model.load_state_dict(torch.load(cache / f"sft-{seed}.pt"))
        trainer = RLTrainer(cfg, model=model, tokenizer=tok, envs=load_envs(cfg), out_dir=cache / "calibrate")
        for sigma in (0.0, 0.3, 0.5, 2.0):
            with parameter_noise(model, sigma, torch.Generator().manual_seed(0)):
                print(
                    f"T={temperature:g} σ={sigma:g}: pass@1 {trainer.evaluate()['eval/pass_at_1']:.3f}",
                    flush=True,
                )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0-2")
    ap.add_argument("--steps", type=int, default=60, help="RL steps per arm")
    ap.add_argument("--jobs", type=int, default=1, help="processes (one torch thread each)")
    ap.add_argument("--arms", default="plain,rewrite,guide,noise")
    ap.add_argument("--out", type=Path, default=Path("runs/bench_exploration"))
    ap.add_argument("--cache", type=Path, default=Path("runs/bench_sft"), help="per-seed SFT weights")
    ap.add_argument(
        "--calibrate", type=int, default=None, help="only print the noise calibration of this seed"
    )
    args = ap.parse_args()
    args.cache.mkdir(parents=True, exist_ok=True)
    if args.calibrate is not None:
        calibrate(args.calibrate, args.cache)
        return
    names = args.arms.split(",")
    seeds = parse_seeds(args.seeds)

    def job(seed: int, arm: str) -> dict[str, Any]:
        return {"seed": seed, "arm": arm, "steps": args.steps, "out": str(args.out), "cache": str(args.cache)}

    first = [job(s, names[i % len(names)]) for i, s in enumerate(seeds)]
    rest = [job(s, names[(i + k) % len(names)]) for k in range(1, len(names)) for i, s in enumerate(seeds)]
    rows: list[dict[str, Any]] = []
    with mp.get_context("spawn").Pool(args.jobs) as pool:
        for stage in (first, rest):
            for r in pool.imap(one, stage):
                rows.append(r)
                print(json.dumps(r), flush=True)
    print(machine(), "· load", os.getloadavg())
    print(f"seeds {args.seeds}, {args.steps} RL steps (DAPO, 16 groups x 8), held-out 200 tasks greedy")
    print("| arm | seed | after SFT | after RL | zero-variance groups | train pass rate | per-variant pass |")
    print("|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: (names.index(r["arm"]), r["seed"])):
        per = ", ".join(f"{k} {v:.2f}" for k, v in sorted(r["variant_pass"].items())) or "-"
        print(
            f"| {r['arm']} | {r['seed']} | {r['after_sft']:.3f} | {r['after_rl']:.3f} | "
            f"{r['flat']:.3f} | {r['pass_rate_train']:.3f} | {per} |"
        )
    summary = {}
    for arm in names:
        mine = [r for r in rows if r["arm"] == arm]
        p, ph = ci95([r["after_rl"] for r in mine])
        f, fh = ci95([r["flat"] for r in mine])
        summary[arm] = (p, f)
        print(
            f"{arm}: held-out pass@1 {p:.3f} ± {ph:.3f}; zero-variance groups {f:.3f} ± {fh:.3f} (n={len(mine)})"
        )
    if "plain" in summary:
        p0, f0 = summary["plain"]
        for arm in names:
            if arm == "plain":
                continue
            p, f = summary[arm]
            ok = f < f0 and p >= p0 - 0.02
            print(
                f"{arm} vs plain: zero-variance {f - f0:+.3f}, pass@1 {p - p0:+.3f}: {'MET' if ok else 'NOT MET'}"
            )


if __name__ == "__main__":
    main()
