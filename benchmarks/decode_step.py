"""One decode step of a real model: verigym's lean Llama decoder against ``transformers``' own forward.

Both sides decode the same batch (B rows, the same random prompt of ``--context`` tokens per row, then
one new token per row) from the same float32 weights, with the same torch threads: transformers through
``model(input_ids, cache=DynamicCache, use_cache=True)`` as ``generate`` runs it, verigym
through ``FastLlama`` (transposed weight copies, in-place KV buffers, decode attention as two batched
matmuls). ``--base REV`` adds a third side, ``verigym@REV``: the ``FastLlama`` of ``_fast_llama.py`` as
committed at REV (read with ``git show``, loaded as a module of its own; REV's file must not import
modules this checkout lacks), for before/after figures in one run; ``--sides`` picks which sides run.
Rounds alternate the order of the sides (forward, then reversed); each round times ``--steps`` steps
after 3 warm-up steps. Prints ms per step and tokens/s per batch size and side, the ratios, and the
largest logit difference from the first side on the last step (the sides round differently in the
last bits).

    python benchmarks/decode_step.py [--model smollm2-135m-instruct] [--batches 1,4,8,16,32] [--threads 2]
        [--base REV] [--sides transformers,verigym,base]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from verigym.policies.local import LocalPolicy
from verigym.policies.local._fast_llama import FastLlama


def hf_side(model: Any, ids: torch.Tensor, steps: int) -> tuple[list[float], torch.Tensor]:
    from transformers import DynamicCache

    cache = DynamicCache()
    out = model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
    token = out.logits[:, -1].argmax(-1, keepdim=True)
    times = []
    for i in range(steps + 3):
        start = time.perf_counter()
        out = model(input_ids=token, cache=cache, use_cache=True, logits_to_keep=1)
        if i >= 3:
            times.append(time.perf_counter() - start)
        token = out.logits[:, -1].argmax(-1, keepdim=True)
    return times, out.logits[:, -1]


def base_fast_llama(rev: str) -> Any:
    """``FastLlama`` as committed at ``rev``, loaded from ``git show`` as a module of its own."""
    root = Path(__file__).resolve().parent.parent
    text = subprocess.run(
        ["git", "show", f"{rev}:src/verigym/policies/local/_fast_llama.py"],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "base_fast_llama.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("verigym_base_fast_llama", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.FastLlama


def lean_side(
    model: Any, ids: torch.Tensor, steps: int, cls: Any = FastLlama
) -> tuple[list[float], torch.Tensor]:
    batch, width = ids.shape
    step = cls(model, batch, width + steps + 4)
    mask = torch.ones(batch, width + steps + 4, dtype=torch.long)
    logits = step(ids, torch.arange(width)[None].expand(batch, width), mask[:, :width])
    token = logits.argmax(-1, keepdim=True)
    times = []
    for i in range(steps + 3):
        start = time.perf_counter()
        n = step.length
        logits = step(token, torch.full((batch, 1), n), mask[:, : n + 1])
        if i >= 3:
            times.append(time.perf_counter() - start)
        token = logits.argmax(-1, keepdim=True)
    return times, logits


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct", help="model directory or catalogue name")
    parser.add_argument("--batches", default="1,4,8,16,32", help="comma-separated batch sizes")
    parser.add_argument("--context", type=int, default=64, help="prompt tokens per row before decoding")
    parser.add_argument("--steps", type=int, default=20, help="timed decode steps per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per side, alternating who goes first")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random prompt")
    parser.add_argument("--base", default="", help="also time FastLlama as committed at this git revision")
    parser.add_argument(
        "--sides",
        default="",
        help="comma-separated sides in order (transformers, verigym, base); ratios are the first's ms "
        "over each other's; default transformers,verigym[,base]",
    )
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = LocalPolicy.from_pretrained(args.model, device="cpu").model.eval()
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(args.seed)
    prompt = torch.randint(0, vocab, (1, args.context), generator=gen)
    sides: dict[str, Callable[[Any, torch.Tensor, int], tuple[list[float], torch.Tensor]]] = {
        "transformers": hf_side,
        "verigym": lean_side,
    }
    if args.base:
        old = base_fast_llama(args.base)
        sides[f"verigym@{args.base}"] = lambda m, i, n: lean_side(m, i, n, old)
    if args.sides:
        named = {("base" if "@" in k else k): k for k in sides}
        sides = {named[w]: sides[named[w]] for w in args.sides.split(",")}
    names = list(sides)
    print(
        f"{args.model}: threads {args.threads}, context {args.context}, {args.rounds} rounds x {args.steps} steps"
    )
    print(f"{'batch':>5} {'side':>12} {'ms/step':>8} {'tokens/s':>9} {'rounds ms/step':>22}")
    with torch.inference_mode():
        for batch in (int(b) for b in args.batches.split(",")):
            ids = prompt.expand(batch, -1).contiguous()
            per: dict[str, list[float]] = {name: [] for name in sides}
            last: dict[str, torch.Tensor] = {}
            for r in range(args.rounds):
                for name in list(sides)[:: 1 if r % 2 == 0 else -1]:
                    times, last[name] = sides[name](model, ids, args.steps)
                    per[name].append(statistics.median(times) * 1000)
            for name, ms in per.items():
                mid = statistics.median(ms)
                spread = " ".join(f"{m:.0f}" for m in ms)
                print(f"{batch:>5} {name:>12} {mid:>8.1f} {batch / mid * 1000:>9.1f} {spread:>22}")
            first = names[0]
            for name in names[1:]:
                ratio = statistics.median(per[first]) / statistics.median(per[name])
                diff = (last[name].float() - last[first].float()).abs().max().item()
                print(
                    f"{batch:>5} {first + '/' + name:>12} {ratio:>7.2f}x  "
                    f"(max |logit diff| on the last step {diff:.1e})"
                )


if __name__ == "__main__":
    main()
