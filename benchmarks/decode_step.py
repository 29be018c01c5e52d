"""One decode step of a real model: verigym's lean Llama decoder against ``transformers``' own forward.

Both sides decode the same batch (B rows, the same random prompt of ``--context`` tokens per row, then
one new token per row) from the same float32 weights, with the same torch threads: transformers through
``model(input_ids, cache=DynamicCache, use_cache=True)`` as ``generate`` runs it, verigym
through ``FastLlama`` (transposed weight copies, in-place KV buffers, decode attention as two batched
matmuls). Rounds alternate the side that goes first; each round times ``--steps`` steps after 3 warm-up
steps. Prints ms per step and tokens/s per batch size and side, the ratio, and the largest logit
difference between the sides on the last step (the two round differently in the last bits).

    python benchmarks/decode_step.py [--model smollm2-135m-instruct] [--batches 1,4,8,16,32] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time
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


def lean_side(model: Any, ids: torch.Tensor, steps: int) -> tuple[list[float], torch.Tensor]:
    batch, width = ids.shape
    step = FastLlama(model, batch, width + steps + 4)
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
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = LocalPolicy.from_pretrained(args.model, device="cpu").model.eval()
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(args.seed)
    prompt = torch.randint(0, vocab, (1, args.context), generator=gen)
    sides = {"transformers": hf_side, "verigym": lean_side}
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
            ratio = statistics.median(per["transformers"]) / statistics.median(per["verigym"])
            diff = (last["verigym"].float() - last["transformers"].float()).abs().max().item()
            print(f"{batch:>5} {'ratio':>12} {ratio:>7.2f}x  (max |logit diff| on the last step {diff:.1e})")


if __name__ == "__main__":
    main()
