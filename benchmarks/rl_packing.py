"""Packed vs padded RL updates on a real model: seconds per update and peak memory (issue 24 item 5).

The rows are one step of the real-model recipe (``verigym.recipes.quickstart_real``: its groups ×
samples, 16 new tokens, sampled at T = 1 from the base model with a fixed seed; advantages are seeded
N(0, 1), since the base model rarely earns a reward and the cost does not depend on them). Layouts:
the rows as sampled (most run to the 16-token limit); ``mixed``, each completion cut at a seeded
length in [2, 16] and ended with EOS (a wide spread of lengths); ``short``, cut at 3 or 4 tokens (the
recipe's answers after SFT: 3.3–3.5 tokens on average, at most 4–8, in its seed-0 runs' metrics). Each update is
one ``policy_update`` with the recipe's DAPO settings (full fine-tuning, AdamW): ``padded`` is today's
default (``rl.share_prefix``: a group's prompt runs once, its completions padded to the longest),
``packed`` is ``rl.packing`` with the same shared prompt (each micro-batch one unpadded sequence).

Time (wall, and the process's CPU time, steadier on a shared machine since the update runs on one
thread): one process, the two sides alternating (the first side swaps each round), each update from the
same weights (restored before it, untimed), after one warm-up update per side. Memory: a fresh
process per side loads the model, resets its peak RSS (Linux ``clear_refs``), runs one update and
reports the peak RSS during it (``VmHWM``) and the RSS before it (model and rows loaded).

    python benchmarks/rl_packing.py [--model smollm2-135m-instruct] [--rounds 3] [--no-memory]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SIDES = ("padded", "packed")


def _status_mb(key: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def reset_peak() -> bool:
    """Reset this process's peak RSS (VmHWM) to its current RSS (Linux ``clear_refs`` 5)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def peak_mb(since_reset: bool) -> float:
    """Peak RSS in MB: VmHWM since the last ``reset_peak``, else the process's ``ru_maxrss``."""
    if since_reset:
        return _status_mb("VmHWM")
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _cfg(out: str, model: str, seed: int, side: str, pack_tokens: int, share: bool) -> Any:
    from verigym.recipes.quickstart_real import real_quickstart_config

    return real_quickstart_config(
        out, model=model, seed=seed, rl__dynamic_sampling=False, rl__packing=side == "packed",
        rl__pack_tokens=pack_tokens, rl__share_prefix=share,
    )  # fmt: skip


def _sample_rows(model_name: str, seed: int) -> tuple[list[Any], int]:
    """One step's rows from the recipe's producer, and the EOS id."""
    import asyncio

    import torch

    from verigym.train import load_model
    from verigym.train.rl import RLTrainer

    cfg = _cfg(tempfile.mkdtemp(prefix="rl_packing_"), model_name, seed, "padded", 1024, True)
    model, tok = load_model(cfg.model)
    trainer = RLTrainer(cfg, model=model, tokenizer=tok)
    batch = asyncio.run(trainer.producer.produce(0))
    rows = [r for g in batch.groups for s in g.samples for r in s.rows]
    gen = torch.Generator().manual_seed(seed)
    for r in rows:
        r.advantage = float(torch.randn(1, generator=gen))
    return rows, int(tok.eos_token_id)


def _cut(rows: list[Any], eos: int, seed: int, low: int, high: int) -> list[Any]:
    """Each completion cut at a seeded length in [low, high] and ended with EOS."""
    import copy
    import random

    rng = random.Random(seed)
    out = []
    for r in rows:
        first = r.mask.index(1)
        keep = min(rng.randint(low, high), len(r.ids) - first)
        c = copy.deepcopy(r)
        c.ids = [*r.ids[: first + keep - 1], eos]
        c.mask = r.mask[: first + keep]
        c.logprobs = None if r.logprobs is None else r.logprobs[: first + keep]
        out.append(c)
    return out


class _Side:
    """A model, its weights to restore, and one optimizer state per side."""

    def __init__(self, model: Any, cfg: Any, pad_id: int) -> None:
        import torch

        from verigym.train._update import UpdateState
        from verigym.train.optim import make_scheduler

        self.model, self.cfg, self.pad_id = model, cfg, pad_id
        opt = torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad], lr=cfg.rl.lr, foreach=True
        )
        self.state = UpdateState(opt, make_scheduler(opt, "constant", 0, 10**6), torch.Generator())

    def update(self, rows: list[Any], seed: int) -> tuple[float, float]:
        """(wall seconds, CPU seconds of this process) of one ``policy_update``."""
        import copy

        from verigym.train._update import policy_update

        self.state.generator.manual_seed(seed)
        rows = copy.deepcopy(rows)
        t0, c0 = time.perf_counter(), time.process_time()
        policy_update(
            self.model, rows, self.cfg.rl, self.state, pad_id=self.pad_id,
            temperature=self.cfg.sampling.temperature, max_len=self.cfg.sampling.max_tokens,
            micro_rows=self.cfg.rl.micro_batch_rows, share_prefix=self.cfg.rl.share_prefix,
        )  # fmt: skip
        return time.perf_counter() - t0, time.process_time() - c0


def _child(args: argparse.Namespace) -> None:
    """One update of one side in this fresh process: RSS before, peak after, seconds."""
    import torch

    torch.set_num_threads(args.threads)
    from verigym.train import load_model

    with open(args.rows, "rb") as f:
        rows = pickle.load(f)[args.layout]
    cfg = _cfg(tempfile.mkdtemp(prefix="rl_packing_"), args.model, args.seed, args.child, args.pack_tokens,
               not args.no_share_prefix)  # fmt: skip
    model, tok = load_model(cfg.model)
    side = _Side(model, cfg, int(tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id))
    before = _status_mb("VmRSS")
    since = reset_peak()
    seconds, _cpu = side.update(rows, args.seed)
    print(json.dumps({"side": args.child, "rss_before_mb": before, "peak_mb": peak_mb(since), "s": seconds}))


def _time(args: argparse.Namespace, layouts: dict[str, list[Any]], share: bool) -> None:
    """Seconds per update of each side, alternating, from the same weights each time."""
    import torch

    from verigym.train import load_model

    cfgs = {s: _cfg(tempfile.mkdtemp(prefix="rl_packing_"), args.model, args.seed, s, args.pack_tokens, share)
            for s in SIDES}  # fmt: skip
    model, tok = load_model(cfgs["padded"].model)
    pad = int(tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    sides = {s: _Side(model, cfgs[s], pad) for s in SIDES}

    def restore() -> None:
        with torch.no_grad():
            for k, v in model.state_dict().items():
                v.copy_(start[k])

    for s in SIDES:  # warm-up: optimizer states, first-call costs
        restore()
        sides[s].update(layouts[next(iter(layouts))], args.seed)
    times: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for rnd in range(args.rounds):
        for name, rs in layouts.items():
            order = SIDES if rnd % 2 == 0 else SIDES[::-1]
            for s in order:
                restore()
                times.setdefault((name, s), []).append(sides[s].update(rs, args.seed))
            (pw, pc), (kw, kc) = times[(name, "padded")][-1], times[(name, "packed")][-1]
            print(f"round {rnd} {name}: padded {pw:.2f}s ({pc:.2f} CPU s)  packed {kw:.2f}s ({kc:.2f} CPU s)  "
                  f"padded/packed {pw / kw:.2f}x wall, {pc / kc:.2f}x CPU", flush=True)  # fmt: skip
    print(f"\nper update, median of {args.rounds} (share_prefix={share}, pack_tokens={args.pack_tokens}):")
    for name in layouts:
        for j, unit in ((0, "wall s"), (1, "CPU s")):
            pad_t, pack_t = (statistics.median(t[j] for t in times[(name, s)]) for s in SIDES)
            ratios = [
                a[j] / b[j] for a, b in zip(times[(name, "padded")], times[(name, "packed")], strict=True)
            ]
            print(f"  {name}: padded {pad_t:.2f} {unit}  packed {pack_t:.2f} {unit}  padded/packed "
                  f"{pad_t / pack_t:.2f}x (per round {', '.join(f'{r:.2f}' for r in ratios)})")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--pack-tokens", type=int, default=512, help="rl.pack_tokens of the packed side")
    ap.add_argument("--no-share-prefix", action="store_true", help="both sides with rl.share_prefix off")
    ap.add_argument("--layouts", default="sampled,mixed", help="of sampled, mixed, short")
    ap.add_argument("--no-memory", action="store_true", help="skip the peak-RSS processes")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)
    ap.add_argument("--rows", help=argparse.SUPPRESS)
    ap.add_argument("--layout", default="sampled", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args)
        return

    import torch

    torch.set_num_threads(args.threads)

    rows, eos = _sample_rows(args.model, args.seed)
    layouts = {
        "sampled": rows,
        "mixed": _cut(rows, eos, args.seed, 2, 16),
        "short": _cut(rows, eos, args.seed, 3, 4),
    }
    layouts = {k: layouts[k] for k in args.layouts.split(",")}
    for name, rs in layouts.items():
        lens = [r.model_tokens for r in rs]
        print(f"{name}: {len(rs)} rows, prompt {rs[0].mask.index(1)} tokens, completions "
              f"{min(lens)}–{max(lens)} (mean {statistics.mean(lens):.1f}) tokens")  # fmt: skip
    share = not args.no_share_prefix
    _time(args, layouts, share)
    if args.no_memory:
        return
    with tempfile.NamedTemporaryFile(suffix=".pkl", delete=False) as f:
        pickle.dump(layouts, f)
    print("\npeak RSS of one update in a fresh process (MB):")
    for name in layouts:
        for s in SIDES:
            cmd = [sys.executable, __file__, "--child", s, "--rows", f.name, "--layout", name,
                   "--model", args.model, "--seed", str(args.seed), "--pack-tokens", str(args.pack_tokens),
                   "--threads", str(args.threads), *(["--no-share-prefix"] if not share else [])]  # fmt: skip
            done = subprocess.run(cmd, capture_output=True, text=True, check=True, env=os.environ.copy())
            res = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"  {name} {s}: peak {res['peak_mb']:.0f}  (before the update {res['rss_before_mb']:.0f}, "
                  f"update +{res['peak_mb'] - res['rss_before_mb']:.0f}; {res['s']:.2f}s)", flush=True)  # fmt: skip
    os.unlink(f.name)


if __name__ == "__main__":
    main()
