"""Continuous batching against micro-batched passes on a long-tailed load: IFEval prompts, greedy.

``--clients`` closed-loop workers take the first ``--prompts`` official IFEval prompts in turn and send
each to one in-process ``LocalPolicy`` (``complete``, greedy, ``--max-tokens``): a reply ends at EOS or
the cap, so lengths vary as in a real eval. The same load runs once per mode, alternating which goes
first round by round: ``continuous=True`` (the default: a waiting prompt joins the running pass at its
next step) and ``continuous=False`` (it waits for the next pass). Prints tokens/s per mode and round,
the ratio, and how many prompts got the same greedy tokens in both modes (batch composition changes
which rows share a matmul, which may change the last bits of a logit).

    python benchmarks/batching_modes.py [--model smollm2-135m-instruct] [--prompts 32] [--clients 16] [--max-tokens 256]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import torch

from verigym.envs.builtin.ifeval import ifeval_default_path, load_ifeval
from verigym.policies.local import LocalPolicy
from verigym.types import Sampling


async def run(
    policy: LocalPolicy, prompts: list, clients: int, max_tokens: int
) -> tuple[float, list[tuple[int, ...]]]:
    queue = list(enumerate(prompts))
    out: dict[int, tuple[int, ...]] = {}
    sampling = Sampling(temperature=0.0, max_tokens=max_tokens)

    async def worker() -> None:
        while queue:
            i, prompt = queue.pop(0)
            out[i] = (await policy.complete(prompt, sampling=sampling)).completion_token_ids

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(clients)))
    return time.perf_counter() - start, [out[i] for i in range(len(prompts))]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct", help="model directory or catalogue name")
    parser.add_argument("--prompts", type=int, default=32, help="first N official IFEval prompts")
    parser.add_argument("--clients", type=int, default=16, help="concurrent closed-loop clients")
    parser.add_argument("--max-tokens", type=int, default=256, help="cap on each reply")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per mode, alternating who goes first")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    parser.add_argument("--json", action="store_true", help="also print the figures as one JSON object")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    path = ifeval_default_path()
    if path is None:
        raise SystemExit("IFEval's input_data.jsonl is not installed: run `make setup`")
    prompts = [list(t.prompt) for t in load_ifeval(path)[: args.prompts]]
    policy = LocalPolicy.from_pretrained(args.model, device="cpu")
    rates: dict[str, list[float]] = {"continuous": [], "micro-batched": []}
    tokens: dict[str, list[tuple[int, ...]]] = {}
    for r in range(args.rounds):
        for mode in list(rates)[:: 1 if r % 2 == 0 else -1]:
            policy.continuous = mode == "continuous"
            wall, tokens[mode] = asyncio.run(run(policy, prompts, args.clients, args.max_tokens))
            rates[mode].append(sum(len(t) for t in tokens[mode]) / wall)
            print(f"round {r} {mode:>14}: {rates[mode][-1]:.1f} tokens/s ({wall:.0f} s)", flush=True)
    same = sum(a == b for a, b in zip(tokens["continuous"], tokens["micro-batched"], strict=True))
    cut = sum(len(t) >= args.max_tokens for t in tokens["continuous"])
    ratio = statistics.median(rates["continuous"]) / statistics.median(rates["micro-batched"])
    print(
        f"continuous / micro-batched: {ratio:.2f}x; same greedy tokens {same}/{len(prompts)}; cut at the cap {cut}"
    )
    if args.json:
        print(json.dumps({"rates": rates, "ratio": ratio, "same": same, "prompts": len(prompts), "cut": cut}))


if __name__ == "__main__":
    main()
