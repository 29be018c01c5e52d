"""Peak RSS of RL steps on a real model, full fine-tuning vs LoRA (issue 24 item 6).

``--ablate``: the update alone, on ``benchmarks/rl_update_speed.py``'s set-up (``update_setup``: its batch:
8 groups × 8, seeded 4–16-token completions, packed into ≤ 512-token micro-batches; full fine-tuning,
fused AdamW), in a fresh process per configuration: everything of issue 43 item 2's memory work on,
then each part off alone (``ABLATIONS``), then all of them off, then other malloc settings. Printed per configuration: the peak
RSS over the first two updates after loading (``VmHWM`` reset after loading, as the speed benchmark's
peak) and the CPU seconds of updates 2 and 3 (the first allocates AdamW's moments).

Each mode runs in a fresh process: the real-model recipe's settings (``verigym.recipes.quickstart_real``:
its groups × samples, 16 new tokens, DAPO, AdamW), without SFT and with dynamic sampling off so every
step updates (the base model rarely earns a reward; rows with zero advantage still run the whole
forward/backward/optimizer step). After loading, the peak RSS (``VmHWM``) is reset (Linux
``clear_refs``) and ``--steps`` RL steps run (generation + scoring + update); printed: RSS after
loading, the peak during the steps, each step's generation and update seconds, and the RSS after each
step (flat from step to step unless something accumulates: it grew ~45 MB a step while oneDNN's
primitive caches filled, issue 43 item 2). RSS figures are MiB (``/proc`` kB / 1024), printed "MB".

    python benchmarks/rl_memory.py [--model smollm2-135m-instruct] [--steps 2] [--modes full,lora]
    python benchmarks/rl_memory.py --ablate [--only all,none]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rl_update_speed import status_mb, update_setup  # a sibling script, not a package

MODES = ("full", "lora", "full+packing", "lora+packing")
ABLATIONS: dict[str, dict[str, Any]] = {  # configuration -> module attributes set before the first update
    "all": {},
    "no lean layers": {"verigym.train._cpu_layers._swaps": lambda *_: []},
    "no chunked head": {"verigym.train._cpu_head.head_of": lambda *_: None},
    "no in-place head gradient": {"verigym.train._cpu_kernels.IN_PLACE_MIN": 1 << 62},
    "no one-buffer blocked attention": {"verigym.train._cpu_kernels.FLASH_BLOCKS": False},
    "no malloc settings": {"verigym.train._malloc._DONE": [False]},
}
ABLATIONS["none"] = {k: v for off in ABLATIONS.values() for k, v in off.items()}
ABLATIONS.update({  # the malloc settings' other candidates, everything else on
    "malloc: mmap threshold 1 MiB": {"verigym.train._malloc.MMAP_THRESHOLD": 1 << 20},
    "malloc: mmap threshold 4 MiB": {"verigym.train._malloc.MMAP_THRESHOLD": 4 << 20},
    "malloc: glibc's thresholds, malloc_trim only": {"verigym.train._malloc.MMAP_THRESHOLD": None,
                                                     "verigym.train._malloc.TRIM_THRESHOLD": None},
})  # fmt: skip


def _child(args: argparse.Namespace) -> None:
    import asyncio

    import torch

    torch.set_num_threads(args.threads)
    from verigym.recipes.quickstart_real import real_quickstart_config
    from verigym.train import load_model
    from verigym.train.rl import RLTrainer

    over: dict[str, Any] = {"rl__dynamic_sampling": False, "rl__packing": "packing" in args.child}
    if args.child.startswith("lora"):
        over["model__lora"] = {"r": args.lora_rank, "alpha": 2 * args.lora_rank}
    cfg = real_quickstart_config(
        tempfile.mkdtemp(prefix="rl_memory_"), model=args.model, seed=args.seed, **over
    )
    model, tok = load_model(cfg.model)
    trainer = RLTrainer(cfg, model=model, tokenizer=tok)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    loaded = status_mb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    steps = []
    for step in range(args.steps):
        t0 = time.perf_counter()
        batch = asyncio.run(trainer.producer.produce(step))
        t1 = time.perf_counter()
        trainer.consume(batch)
        steps.append({"gen_s": t1 - t0, "update_s": time.perf_counter() - t1, "peak_mb": status_mb("VmHWM"),
                      "after_mb": status_mb("VmRSS")})  # fmt: skip
    print(json.dumps({"mode": args.child, "trainable": trainable, "loaded_mb": loaded, "steps": steps}))


def _ablate_child(args: argparse.Namespace) -> None:
    """One configuration of ``--ablate`` (see the module doc): ``rl_update_speed.update_setup``'s update."""
    import copy
    import importlib

    import torch

    torch.set_num_threads(args.threads)
    for target, value in ABLATIONS[args.ablate_child].items():
        module, attr = target.rsplit(".", 1)
        setattr(importlib.import_module(module), attr, value)
    setup = update_setup(args.model, "recipe", args.seed)
    loaded = status_mb("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")
    cpu, peak = [], 0.0
    for i in range(3):
        c0 = time.process_time()
        setup.run(copy.deepcopy(setup.rows))
        cpu.append(time.process_time() - c0)
        if i == 1:
            peak = status_mb("VmHWM")
    print(json.dumps({"loaded_mb": loaded, "peak_mb": peak, "cpu_s": cpu}))


def _ablate(args: argparse.Namespace) -> None:
    names = list(ABLATIONS) if not args.only else args.only.split(",")
    print(f"{args.model}: the update alone (8 x 8, packed 512), fresh process per configuration; load "
          f"{os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    for name in names:
        cmd = [sys.executable, __file__, "--ablate-child", name, "--model", args.model, "--seed", str(args.seed),
               "--threads", str(args.threads)]  # fmt: skip
        env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
        done = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env)
        res = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"  {name}: peak RSS {res['peak_mb']:.0f} MB over two updates (after loading "
              f"{res['loaded_mb']:.0f}); CPU s per update {res['cpu_s'][1]:.2f}, {res['cpu_s'][2]:.2f} "
              f"(first {res['cpu_s'][0]:.2f}); load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--modes", default="full,lora", help=f"comma-separated, of {', '.join(MODES)}")
    ap.add_argument("--lora-rank", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ablate", action="store_true", help="the update alone, each memory change off in turn")
    ap.add_argument("--only", default="", help=f"with --ablate: comma-separated, of {', '.join(ABLATIONS)}")
    ap.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    ap.add_argument("--ablate-child", choices=list(ABLATIONS), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args)
        return
    if args.ablate_child:
        _ablate_child(args)
        return
    if args.ablate:
        _ablate(args)
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
        after = ", ".join(f"{s['after_mb']:.0f}" for s in res["steps"])
        print(f"  {mode}: {res['trainable'] / 1e6:.2f}M trainable; RSS after loading {res['loaded_mb']:.0f} MB, "
              f"peak during the steps {peak:.0f} MB (+{peak - res['loaded_mb']:.0f}); "
              f"generation+update per step {times}; RSS after each step {after} MB", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
