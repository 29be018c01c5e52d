"""Synchronous vs asynchronous RL with generation on a separate ``verigym serve`` process.

The quickstart recipe (arithmetic, DAPO preset) on the tiny model: a light SFT warm-up gives the
shared starting point, which a ``verigym serve`` subprocess serves; the trainer trains a LoRA
adapter and pushes it after every update (``/v1/load_lora_adapter``). For max_staleness d = 0
(synchronous: generate, train, push, generate ...), 1 and 2 it reports steps/hour, held-out pass@1
after the same number of steps, and the measured speed-up next to the one ``async_sim.py``
predicts from the synchronous run's own generation / training / push times.

    python benchmarks/async_rl.py --steps 8 --staleness 0 1 2

Both processes share this machine's CPU cores, so generation and training also compete for them;
on separate machines (or a GPU server) the overlap is cleaner.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from async_sim import predicted_speedup, simulate
from verigym.serve import spawn_server


def warm_start(out: Path, seed: int) -> Path:
    """The quickstart's light SFT, saved as a full model directory."""
    from verigym.recipes.quickstart import quickstart_config
    from verigym.train.pipeline import run_sft

    cfg = quickstart_config(out, seed=seed)
    summary = run_sft(cfg)
    print(f"warm start: SFT to held-out pass@1 {summary['pass_at_1']:.3f} -> {summary['model_dir']}")
    return Path(summary["model_dir"])


def run(base: Path, url: str, d: int, steps: int, out: Path, seed: int) -> dict[str, Any]:
    from verigym.recipes.quickstart import quickstart_config
    from verigym.scale.async_loop import AsyncRLTrainer
    from verigym.scale.remote import RemoteSampler
    from verigym.train import load_model

    cfg = quickstart_config(
        out,
        seed=seed,
        **{
            "model__path": str(base),
            "model__lora": {"r": 16, "alpha": 32},
            "rl__steps": steps,
            "sft__demos": 0,
        },
    )
    model, tok = load_model(cfg.model)
    sampler = RemoteSampler([url], push_dir=out / "push", served_name=f"bench-d{d}")
    trainer = AsyncRLTrainer(cfg, model=model, tokenizer=tok, max_staleness=d, sampler=sampler)
    t0 = time.perf_counter()
    hist = trainer.train()
    wall = time.perf_counter() - t0
    pass1 = trainer.evaluate()["eval/pass_at_1"]
    return {
        "d": d,
        "wall_s": wall,
        "steps_per_hour": steps / wall * 3600,
        "pass_at_1": pass1,
        "gen_s": sum(m["gen_time_s"] for m in hist) / len(hist),
        "train_s": sum(m["update_time_s"] for m in hist) / len(hist),
        "staleness_mean": sum(m.get("async/staleness_mean", 0.0) for m in hist) / len(hist),
        "reward": sum(m.get("reward", 0.0) for m in hist) / len(hist),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=8, help="RL steps per run")
    ap.add_argument("--staleness", type=int, nargs="+", default=[0, 1, 2], help="values of max_staleness d")
    ap.add_argument(
        "--base", type=Path, default=None, help="a warm-started model directory (default: SFT one)"
    )
    ap.add_argument("--server-threads", type=int, default=1, help="torch threads of the serve process")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of the trainer")
    ap.add_argument("--seed", type=int, default=0, help="seed of model, tasks and sampling")
    ap.add_argument("--json", action="store_true", help="print one JSON object at the end")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    work = Path(tempfile.mkdtemp(prefix="verigym-async-rl-"))
    base = args.base or warm_start(work / "warm", args.seed)
    proc, url = spawn_server(
        str(base),
        "--name",
        "base",
        "--allow-adapter-loading",  # the trainer pushes LoRA weights (saved under work) to the server
        str(work),
        threads=args.server_threads,
        timeout_s=180,
    )
    try:
        results = [run(base, url, d, args.steps, work / f"d{d}", args.seed) for d in args.staleness]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    sync = results[0]
    push_s = max(sync["wall_s"] / args.steps - sync["gen_s"] - sync["train_s"], 0.0)
    print(f"sync step: gen {sync['gen_s']:.2f}s  train {sync['train_s']:.2f}s  push+other {push_s:.2f}s")
    print(
        f"{'d':>3} {'steps/h':>8} {'measured':>9} {'simulated':>9} {'closed-form':>11} {'pass@1':>7} {'stale':>6}"
    )
    for r in results:
        sim = simulate(
            gen_s=sync["gen_s"], train_s=sync["train_s"], push_s=push_s,
            max_staleness=r["d"], steps=500, jitter=0.3, seed=0,
        )  # fmt: skip
        sim0 = simulate(
            gen_s=sync["gen_s"], train_s=sync["train_s"], push_s=push_s,
            max_staleness=0, steps=500, jitter=0.3, seed=0,
        )  # fmt: skip
        r["speedup"] = r["steps_per_hour"] / sync["steps_per_hour"]
        r["sim_speedup"] = sim.steps_per_hour / sim0.steps_per_hour
        r["closed_form"] = 1.0 if r["d"] == 0 else predicted_speedup(sync["gen_s"], sync["train_s"], push_s)
        print(
            f"{r['d']:>3} {r['steps_per_hour']:>8.0f} {r['speedup']:>8.2f}x {r['sim_speedup']:>8.2f}x "
            f"{r['closed_form']:>10.2f}x {r['pass_at_1']:>7.3f} {r['staleness_mean']:>6.2f}"
        )
    for r in results[1:]:
        print(f"d={r['d']}: measured/predicted speed-up ratio {r['speedup'] / r['sim_speedup']:.2f}")
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
