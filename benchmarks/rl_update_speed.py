"""The RL update today vs at a base revision, on the real model at the recipe's settings (issue 43 item 2).

Two worker processes, one per side: ``new`` runs this checkout's ``src/``, ``base`` runs ``--base REV``
checked out in a temporary ``git worktree`` (removed afterwards), each with ``PYTHONPATH=<tree>/src``
and the same Python, torch thread count and seeds. Each worker loads SmolLM2-135M-Instruct in float32,
builds the same batch (``gpu_rl_update.make_rows``: 8 groups × 8 rows, the recipe's 52-token
arithmetic prompt in the model's chat template, seeded completions of 4–16 tokens ending with EOS,
``--shape short``: 3–4 tokens, the recipe's answers after SFT; group-normalised seeded 0/1 rewards),
fills π_old with a plain no-grad forward, and builds the optimizer as ``RLTrainer`` does
(``make_optimizer(..., foreach=True)``). One update is ``policy_update`` with the real-model recipe's
RL settings (``quickstart_real``: DAPO, packing into 512-token micro-batches, shared prompts, full
fine-tuning, grad-norm clip 1.0), every time from the same starting weights (restored, untimed).

After one warm-up update per side, ``--rounds`` rounds each time one update per side, the first side
alternating round by round, so both see the same load. Printed: ms per update (wall and the worker's
CPU time) per round and their medians, the per-round ratios base/new and their median, then each side's
peak RSS in a fresh worker that loads, resets its peak (``clear_refs``) and runs two updates as a
training process does (the first allocates AdamW's moments; no copy of the weights kept: ``VmHWM``), the first update's loss and grad norm on both sides,
and the largest weight difference after that update; then MET/NOT MET for "≥ 1.5× faster" (median of
the per-round wall ratios) and "peak RSS ≤ 3 GB" (the new side).

    python benchmarks/rl_update_speed.py --base REV [--rounds 3] [--threads 1] [--shape recipe|short]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SHAPES = {
    "recipe": {"groups": 8, "group_size": 8, "min_new": 4, "max_new": 16, "pack_tokens": 512},
    "short": {"groups": 8, "group_size": 8, "min_new": 3, "max_new": 4, "pack_tokens": 512},
}
TARGET_SPEEDUP = 1.5
TARGET_PEAK_MB = 3 * 1024


def status_mb(key: str) -> float:
    """``key`` of this process's ``/proc/self/status`` (``VmRSS``, ``VmHWM``) in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


@dataclass
class UpdateSetup:
    """One update's inputs as ``update_setup`` builds them: the model, the batch with π_old filled, the
    recipe's RL settings and the optimizer state; ``run(batch)`` is one ``policy_update`` on ``batch``."""

    model: Any
    rows: list[Any]
    pad: int
    rl: Any
    state: Any
    max_len: int

    def run(self, batch: list[Any]) -> dict[str, Any]:
        from verigym.train._update import policy_update

        rl = self.rl
        metrics = policy_update(self.model, batch, rl, self.state, pad_id=self.pad, temperature=1.0,
                                max_len=self.max_len, micro_rows=rl.micro_batch_rows, share_prefix=rl.share_prefix)  # fmt: skip
        return dict(metrics)


def update_setup(model_name: str, shape: str, seed: int) -> UpdateSetup:
    """The update's set-up, in the calling process (torch's threads are the caller's): ``model_name``
    loaded in float32, ``SHAPES[shape]``'s batch (``gpu_rl_update.make_rows``) with π_old from a plain
    no-grad forward, the real-model recipe's RL settings at that shape, and the optimizer as
    ``RLTrainer`` builds it (``make_optimizer(..., foreach=True)``). ``benchmarks/rl_memory.py
    --ablate`` runs its updates on the same set-up."""
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from gpu_rl_update import fill_old_logprobs, make_rows  # the GPU benchmark's batch, on the CPU
    from verigym.policies.catalogue import resolve

    try:
        from verigym.recipes.quickstart_real import real_quickstart_config
    except ImportError:  # a base revision from before verigym.recipes (8ecc9df)
        from verigym.train.quickstart_real import real_quickstart_config  # type: ignore[no-redef]
    from verigym.train._update import UpdateState
    from verigym.train.optim import make_optimizer

    dims = SHAPES[shape]
    path = resolve(model_name)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.eval()
    rows = make_rows(tok, dims, seed, model.config.vocab_size)
    pad = int(tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
    fill_old_logprobs(model, rows, pad)
    sets = {"sampling__max_tokens": dims["max_new"], "rl__pack_tokens": dims["pack_tokens"]}
    rl = real_quickstart_config(tempfile.mkdtemp(prefix="rl_update_speed_"), model=model_name, seed=seed,
                                **sets).rl  # fmt: skip
    opt, sched = make_optimizer(model.parameters(), rl, 10_000, foreach=True)
    state = UpdateState(optimizer=opt, scheduler=sched, generator=torch.Generator())
    return UpdateSetup(model, rows, pad, rl, state, dims["max_new"])


def _worker(args: argparse.Namespace) -> None:
    """One side: load, build the batch, then answer ``update`` / ``save PATH`` / ``quit`` on stdin."""
    import copy

    import torch

    import verigym

    torch.set_num_threads(args.threads)
    setup = update_setup(args.model, args.shape, args.seed)
    model, rows, rl = setup.model, setup.rows, setup.rl
    start = {} if args.peak else {k: v.detach().clone() for k, v in model.state_dict().items()}
    o = getattr(setup.state.optimizer, "defaults", {})
    info = {"verigym": verigym.__file__, "rss_mb": status_mb("VmRSS"), "fused": o.get("fused"),
            "foreach": o.get("foreach"), "rows": len(rows), "tokens": sum(len(r.ids) for r in rows),
            "new_tokens": sum(r.model_tokens for r in rows), "packing": rl.packing,
            "pack_tokens": rl.pack_tokens, "threads": torch.get_num_threads()}  # fmt: skip
    Path("/proc/self/clear_refs").write_text("5")  # peak RSS from here on
    if args.peak:  # a training process: no copy of the weights to restore; two steps (AdamW's moments)
        for _ in range(2):
            setup.run(copy.deepcopy(rows))
        print(json.dumps({**info, "peak_mb": status_mb("VmHWM")}), flush=True)
        return
    print(json.dumps(info), flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd or cmd[0] == "quit":
            break
        if cmd[0] == "save":
            torch.save({k: v.detach().clone() for k, v in model.state_dict().items()}, cmd[1])
            print(json.dumps({"saved": cmd[1]}), flush=True)
            continue
        with torch.no_grad():
            for k, v in model.state_dict().items():
                v.copy_(start[k])
        setup.state.generator.manual_seed(args.seed)
        batch = copy.deepcopy(rows)
        t0, c0 = time.perf_counter(), time.process_time()
        m = setup.run(batch)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        print(json.dumps({"wall": wall, "cpu": cpu, "peak_mb": status_mb("VmHWM"), "loss": m["loss"],
                          "grad_norm": m["grad_norm"]}), flush=True)  # fmt: skip


class _Side:
    def __init__(self, name: str, src: Path, args: argparse.Namespace, peak: bool = False) -> None:
        env = {
            **os.environ,
            "PYTHONPATH": str(src),
            "PYTHONHASHSEED": "0",
            "OMP_NUM_THREADS": str(args.threads),
        }
        cmd = [sys.executable, __file__, "--worker", "--model", args.model, "--seed", str(args.seed),
               "--threads", str(args.threads), "--shape", args.shape, *(["--peak"] if peak else [])]  # fmt: skip
        self.name = name
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                                     cwd=tempfile.gettempdir())  # fmt: skip
        self.info = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"the {self.name} worker exited (code {self.proc.wait()})")
        return dict(json.loads(line))

    def ask(self, cmd: str) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(cmd + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write("quit\n")
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


def _compare(sides: dict[str, _Side]) -> float:
    import torch

    tmp = Path(tempfile.mkdtemp(prefix="rl_update_speed_"))
    states = {}
    for name, side in sides.items():
        side.ask("update")
        side.ask(f"save {tmp / name}.pt")
        states[name] = torch.load(tmp / f"{name}.pt")
        os.unlink(tmp / f"{name}.pt")
    tmp.rmdir()
    return max(float((states["new"][k] - states["base"][k]).abs().max()) for k in states["new"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="HEAD", help="the revision to compare against (a git worktree of it)")
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="recipe")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--peak", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        _worker(args)
        return
    rev = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", args.base], capture_output=True,
                         text=True, check=True).stdout.strip()  # fmt: skip
    tree = Path(tempfile.mkdtemp(prefix="rl_update_base_")) / "tree"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), rev], check=True,
                   capture_output=True)  # fmt: skip
    sides: dict[str, _Side] = {}
    try:
        print(f"load: {os.getloadavg()[0]:.1f} (1-min average) on {os.cpu_count()} CPUs", flush=True)
        srcs = {"new": REPO / "src", "base": tree / "src"}
        sides = {name: _Side(name, side_src, args) for name, side_src in srcs.items()}
        for name, side in sides.items():
            print(f"{name}: {json.dumps(side.info)}", flush=True)
        first = {name: side.ask("update") for name, side in sides.items()}  # warm-up
        for name, r in first.items():
            print(
                f"{name} warm-up: {r['wall'] * 1e3:.0f} ms, loss {r['loss']:.7f}, grad norm {r['grad_norm']:.7f}"
            )
        times: dict[str, list[tuple[float, float]]] = {"new": [], "base": []}
        for rnd in range(args.rounds):
            order = ("new", "base") if rnd % 2 == 0 else ("base", "new")
            for name in order:
                r = sides[name].ask("update")
                times[name].append((r["wall"], r["cpu"]))
            (nw, nc), (bw, bc) = times["new"][-1], times["base"][-1]
            print(f"round {rnd} ({order[0]} first): new {nw * 1e3:.0f} ms ({nc * 1e3:.0f} CPU ms), base "
                  f"{bw * 1e3:.0f} ms ({bc * 1e3:.0f} CPU ms): base/new {bw / nw:.2f}x wall, {bc / nc:.2f}x CPU; "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
        dw = _compare(sides)
        for side in sides.values():
            side.close()
        peak = {name: _Side(name, side_src, args, peak=True).info for name, side_src in srcs.items()}
    finally:
        for side in sides.values():
            side.close()
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)
    med = {n: [statistics.median(t[j] for t in times[n]) for j in (0, 1)] for n in times}
    wall_r = [b[0] / n[0] for n, b in zip(times["new"], times["base"], strict=True)]
    cpu_r = [b[1] / n[1] for n, b in zip(times["new"], times["base"], strict=True)]
    print(f"\n{args.shape}, base {rev} vs this checkout, {args.rounds} rounds, {args.threads} thread(s):")
    for n in ("base", "new"):
        print(f"  {n}: {med[n][0] * 1e3:.0f} ms per update (median wall), {med[n][1] * 1e3:.0f} CPU ms; "
              f"peak RSS {peak[n]['peak_mb']:.0f} MB over two updates in a fresh process (after loading "
              f"{peak[n]['rss_mb']:.0f} MB)")  # fmt: skip
    speed = statistics.median(wall_r)
    print(
        f"  base/new: {speed:.2f}x wall (per round {', '.join(f'{r:.2f}' for r in wall_r)}), "
        f"{statistics.median(cpu_r):.2f}x CPU (per round {', '.join(f'{r:.2f}' for r in cpu_r)})"
    )
    print(f"  first update: loss {first['base']['loss']:.7f} / {first['new']['loss']:.7f}, grad norm "
          f"{first['base']['grad_norm']:.7f} / {first['new']['grad_norm']:.7f} (base / new); largest weight "
          f"difference after one update {dw:.2e}")  # fmt: skip
    print(f"  >= {TARGET_SPEEDUP}x faster: {'MET' if speed >= TARGET_SPEEDUP else 'NOT MET'}")
    top = peak["new"]["peak_mb"]
    print(f"  peak RSS <= 3 GB: {'MET' if top <= TARGET_PEAK_MB else 'NOT MET'} ({top:.0f} MB)")


if __name__ == "__main__":
    main()
