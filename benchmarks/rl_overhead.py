"""verigym's RL step time vs the bare cost of the same work.

Bare = one batched ``LocalPolicy.generate`` of the same number of rows (groups × group size, same
prompts, same max tokens) + one forward/backward over the sampled sequences + an optimizer step, with
no environment, rubric, advantages, queue or metrics. verigym = a full ``RLTrainer`` step (rollouts
through the environment harness, rubric scoring, advantages, loss, update, metrics). Both are on the
same model, alternating step by step so machine load affects them alike.

    python benchmarks/rl_overhead.py [--steps 10] [--groups 16] [--group-size 8] [--size tiny]

Prints the median seconds per step of each, each step's ratio and the ratio of the medians with
MET / NOT MET against issue 17's target (≤ 1.1×). The side that runs first alternates step by step.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=10, help="steps measured for each (after one warm-up)")
    ap.add_argument("--groups", type=int, default=16, help="tasks per step")
    ap.add_argument("--group-size", type=int, default=8, help="samples per task")
    ap.add_argument("--max-tokens", type=int, default=16, help="max completion tokens")
    ap.add_argument("--size", default="tiny", help="tiny model size: tiny, small, base")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from verigym.envs.registry import load_env
    from verigym.policies.local import LocalPolicy
    from verigym.runner import tuned_gc
    from verigym.train import load_model
    from verigym.train import losses as L
    from verigym.train.config import build_config
    from verigym.train.rl import RLTrainer
    from verigym.train.samples import Row, collate
    from verigym.types import Sampling

    cfg = build_config(
        {
            "out_dir": tempfile.mkdtemp(prefix="rl_overhead_"),
            "model": {"tiny": args.size},
            "envs": [{"name": "arithmetic", "args": {"level": 1}}],
            "sampling": {"temperature": 1.0, "max_tokens": args.max_tokens},
            "rl": {
                "preset": "dr_grpo",
                "steps": 10**6,
                "groups_per_step": args.groups,
                "group_size": args.group_size,
            },
            "logging": {"report": False},
        }
    )
    model, tok = load_model(cfg.model)
    trainer = RLTrainer(cfg, model=model, tokenizer=tok)
    env = load_env("arithmetic", level=1)
    tasks = env.tasks(args.groups * (args.steps + 1), seed=1, split="train")
    bare_policy = LocalPolicy(model, tok)
    bare_opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-6)
    pad = int(tok.pad_token_id)

    def bare_step(i: int) -> float:
        t0 = time.perf_counter()
        prompts = [
            list(t.prompt)
            for t in tasks[i * args.groups : (i + 1) * args.groups]
            for _ in range(args.group_size)
        ]
        comps = bare_policy.generate(
            prompts, Sampling(temperature=1.0, max_tokens=args.max_tokens), seeds=list(range(len(prompts)))
        )
        rows = [
            Row(
                ids=list(c.prompt_token_ids or ()) + list(c.completion_token_ids or ()),
                mask=[0] * len(c.prompt_token_ids or ()) + [1] * len(c.completion_token_ids or ()),
                logprobs=None,
                advantage=1.0,
            )
            for c in comps
        ]
        batch = collate(rows, pad)
        model.train()
        out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask, use_cache=False)
        logp = L.token_logprobs(out.logits[:, :-1], batch.targets)
        loss = -(logp * batch.mask).sum() / batch.mask.sum()
        bare_opt.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        bare_opt.step()
        model.eval()
        return time.perf_counter() - t0

    async def vg_step(i: int) -> float:
        t0 = time.perf_counter()
        batch = await trainer.producer.produce(i)
        trainer.consume(batch)
        return time.perf_counter() - t0

    bare_step(0)
    asyncio.run(vg_step(0))
    bare: list[float] = []
    vg: list[float] = []
    with tuned_gc():  # as RLTrainer.train runs its loop; both sides alike
        for i in range(1, args.steps + 1):  # the side that goes first alternates step by step
            if i % 2:
                bare.append(bare_step(i))
                vg.append(asyncio.run(vg_step(i)))
            else:
                vg.append(asyncio.run(vg_step(i)))
                bare.append(bare_step(i))
    b, v = statistics.median(bare), statistics.median(vg)
    ratios = [y / x for x, y in zip(bare, vg, strict=True)]
    rows_per_step = args.groups * args.group_size
    print(f"{args.size} model, {args.groups} groups x {args.group_size} samples = {rows_per_step} rows/step, "
          f"max {args.max_tokens} tokens, {args.threads} thread(s), median of {args.steps} steps, "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"bare (generate + fwd/bwd + step): {b:.3f} s/step")
    print(f"verigym RL step:                  {v:.3f} s/step")
    print(f"per-step ratios: {' '.join(f'{r:.2f}' for r in ratios)}")
    print(f"overhead ratio (median of medians): {v / b:.2f}x; median per-step ratio "
          f"{statistics.median(ratios):.2f}x; target <= 1.1x (issue 17): "
          f"{'MET' if v / b <= 1.1 else 'NOT MET'}")  # fmt: skip


if __name__ == "__main__":
    main()
