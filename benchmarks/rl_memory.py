"""Peak RSS of RL steps on a real model, full fine-tuning vs LoRA (issue 24 item 6).

Each mode runs in a fresh process: the real-model recipe's settings (``verigym.recipes.quickstart_real``:
its groups × samples, 16 new tokens, DAPO, AdamW), without SFT and with dynamic sampling off so every
step updates (the base model rarely earns a reward; rows with zero advantage still run the whole
forward/backward/optimizer step). After loading, the peak RSS (``VmHWM``) is reset (Linux
``clear_refs``) and ``--steps`` RL steps run (generation + scoring + update); printed: RSS after
loading, the peak during the steps, and each step's generation and update seconds.

    python benchmarks/rl_memory.py [--model smollm2-135m-instruct] [--steps 2] [--modes full,lora]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODES = ("full", "lora", "full+packing", "lora+packing")


def _status_mb(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _child(args: argparse.Namespace) -> None:
    import asyncio

    import torch

    torch.set_num_threads(args.threads)
    from verigym.recipes.quickstart_real import real_quickstart_config
    from verigym.train import load_model
    from verigym.train.rl import RLTrainer

    over = {"rl__dynamic_sampling": False, "rl__packing": "packing" in args.child}
    if args.child.startswith("lora"):
        over["model__lora"] = {"r": args.lora_rank, "alpha": 2 * args.lora_rank}
    cfg = real_quickstart_config(
        tempfile.mkdtemp(prefix="rl_memory_"), model=args.model, seed=args.seed, **over
    )
    model, tok = load_model(cfg.model)
    trainer = RLTrainer(cfg, model=model, tokenizer=tok)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    loaded = _status_mb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    steps = []
    for step in range(args.steps):
        t0 = time.perf_counter()
        batch = asyncio.run(trainer.producer.produce(step))
        t1 = time.perf_counter()
        trainer.consume(batch)
        steps.append({"gen_s": t1 - t0, "update_s": time.perf_counter() - t1, "peak_mb": _status_mb("VmHWM")})
    print(json.dumps({"mode": args.child, "trainable": trainable, "loaded_mb": loaded, "steps": steps}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--modes", default="full,lora", help=f"comma-separated, of {', '.join(MODES)}")
    ap.add_argument("--lora-rank", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args)
        return
    from verigym.recipes.quickstart_real import real_quickstart_config

    rl = real_quickstart_config(tempfile.mkdtemp(prefix="rl_memory_"), model=args.model).rl
    print(f"{args.model}: {rl.groups_per_step} groups x {rl.group_size} samples, 16 new tokens, {rl.preset}; "
          f"{args.steps} RL steps per mode, LoRA rank {args.lora_rank}")  # fmt: skip
    for mode in args.modes.split(","):
        cmd = [sys.executable, __file__, "--child", mode, "--model", args.model, "--steps", str(args.steps),
               "--lora-rank", str(args.lora_rank), "--seed", str(args.seed), "--threads", str(args.threads)]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
        res = json.loads(done.stdout.strip().splitlines()[-1])
        peak = max(s["peak_mb"] for s in res["steps"])
        times = ", ".join(f"{s['gen_s']:.1f}+{s['update_s']:.1f}s" for s in res["steps"])
        print(f"  {mode}: {res['trainable'] / 1e6:.2f}M trainable; RSS after loading {res['loaded_mb']:.0f} MB, "
              f"peak during the steps {peak:.0f} MB (+{peak - res['loaded_mb']:.0f}); "
              f"generation+update per step {times}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
