"""Cost as work grows on SmolLM2-135M-Instruct (issue 43 item 4): the RL step and ``verigym serve``.

**RL step** (in this process, 1 torch thread as the recipe): sampling and the update timed separately,
along two axes around the real-model recipe's point (``quickstart_real``: 8 groups of 8, 16 tokens):
groups 4 / 8 / 16 at 16 tokens, and completion length 16 / 64 / 256 at 8 groups. Sampling is the
recipe's: ``LocalPolicy`` (the lean decoder, continuous batching), every sample its own concurrent
``complete`` call with the trainer's ``Sampling`` (temperature 1, logprobs, a seed each), on the recipe's
arithmetic prompt in SmolLM2's chat template (a seeded sum per group). EOS is ignored
(``stop_token_ids=[]``) so every completion is exactly the length asked: the work of a point is known.
The update is ``policy_update`` on those rows (the sampler's logprobs as π_old, seeded group-normalised
0/1 rewards) with the recipe's RL settings (DAPO, packing into 512-token micro-batches, shared prompts,
AdamW as ``make_optimizer`` builds it) and ``max_tokens``/``groups_per_step`` set to the point's.
The weights are restored before every point (untimed), so every point samples from the same model.
One untimed warm-up point, then ``--rounds`` rounds over the points (the order reversed every other
round); each point's median over rounds. Per point: seconds, ms per generated token (sampling), ms per
trained token (the completion tokens the loss covers), per forwarded token (every row's prompt +
completion) and per laid-down token (what the packed forward computes: a group's shared prompt once per
micro-batch, ``laid_tokens``).

**Serve** (subprocess, ``--serve-threads`` threads): ``verigym serve`` in float32, greedy chats of
``--tokens`` tokens (``serve_vs_llamacpp``'s questions and client) at concurrency 1 … 128, max(8, waves × N)
requests a level from N closed-loop workers; one fresh server a round, warmed up (1 request, then the
top level at once, 8 tokens each), levels ascending, then descending the next round. Per level:
completion tokens/s, p50/p95 latency, the gain over the level before.

For each axis: a least-squares line through the points (intercept, slope, R²), the time per unit of
work at the largest point ÷ at the smallest, and the marginal cost of each interval, so it says whether
the cost grows linearly and where it bends.

Run time (defaults: one round of each part): at load 7-14 on 2 cores (2026-11-29) an RL round took
~27 minutes and a serve round with ``--waves 1`` ~10; about a third of that on an idle machine is an
estimate, not a measurement. The 8 × 256 point is most of the RL part; ``--lengths 16,64``,
``--waves 1`` or ``--only rl|serve`` shorten it.

    python benchmarks/scaling_real.py [--rounds 1] [--groups 4,8,16] [--lengths 16,64,256]
        [--serve-rounds 1] [--waves 2] [--concurrency 1,2,4,8,16,32,64,128] [--only rl|serve] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

RECIPE_GROUPS, RECIPE_TOKENS, GROUP_SIZE = 8, 16, 8


class RLBench:
    """The model, optimizer and starting weights, shared by every point."""

    def __init__(self, model: str, seed: int) -> None:
        import torch

        from verigym.policies.local.policy import LocalPolicy
        from verigym.recipes.quickstart_real import real_quickstart_config
        from verigym.train._update import UpdateState
        from verigym.train.optim import make_optimizer

        self.model_name, self.seed = model, seed
        self.policy = LocalPolicy.from_pretrained(model, dtype="float32", device="cpu", stop_token_ids=[])
        self.model, self.tok = self.policy.model, self.policy.tokenizer
        self.pad = int(self.tok.pad_token_id if self.tok.pad_token_id is not None else self.tok.eos_token_id)
        self.tmp = tempfile.mkdtemp(prefix="scaling_real_")
        rl = real_quickstart_config(self.tmp, model=model, seed=seed).rl
        opt, sched = make_optimizer(self.model.parameters(), rl, 10_000, foreach=True)
        self.state = UpdateState(optimizer=opt, scheduler=sched, generator=torch.Generator())
        self.start = {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def _restore(self) -> None:
        import torch

        with torch.no_grad():
            for k, v in self.model.state_dict().items():
                v.copy_(self.start[k])
        self.state.generator.manual_seed(self.seed)

    def point(self, groups: int, tokens: int) -> dict[str, Any]:
        """Sample ``groups`` × 8 completions of ``tokens`` tokens, then one update on them; timings."""
        import torch

        from verigym.recipes.quickstart_real import real_quickstart_config
        from verigym.train._update import policy_update
        from verigym.train.samples import Row
        from verigym.types import Message, Sampling

        self._restore()
        rng = random.Random(self.seed)
        chats = []
        for _ in range(groups):
            a, b = rng.randint(10, 99), rng.randint(10, 99)
            text = f"Compute {a} + {b}. Give the final answer as an integer in \\boxed{{}}."
            chats.append([Message(role="user", content=text)])
        base = Sampling(temperature=1.0, max_tokens=tokens, logprobs=True)

        async def sample() -> list[Any]:
            calls = [
                self.policy.complete(chat, sampling=base.model_copy(update={"seed": 1000 * g + i}))
                for g, chat in enumerate(chats)
                for i in range(GROUP_SIZE)
            ]
            return list(await asyncio.gather(*calls))

        passes = self.policy.passes
        t0 = time.perf_counter()
        done = asyncio.run(sample())
        sample_s = time.perf_counter() - t0
        rows = []
        for g in range(groups):
            rewards = [rng.randint(0, 1) for _ in range(GROUP_SIZE)]
            rewards[0] = 1 - rewards[1] if len(set(rewards)) == 1 else rewards[0]  # a mixed group
            r = torch.tensor(rewards, dtype=torch.float32)
            adv = ((r - r.mean()) / (r.std() + 1e-6)).tolist()
            for i in range(GROUP_SIZE):
                c = done[g * GROUP_SIZE + i]
                p, ids = list(c.prompt_token_ids), list(c.completion_token_ids)
                rows.append(Row(ids=p + ids, mask=[0] * len(p) + [1] * len(ids),
                                logprobs=[0.0] * len(p) + list(c.logprobs), advantage=adv[i]))  # fmt: skip
        sets = {"sampling__max_tokens": tokens, "rl__groups_per_step": groups}
        rl = real_quickstart_config(self.tmp, model=self.model_name, seed=self.seed, **sets).rl
        t0 = time.perf_counter()
        metrics = policy_update(self.model, rows, rl, self.state, pad_id=self.pad, temperature=1.0,
                                max_len=tokens, micro_rows=rl.micro_batch_rows, share_prefix=rl.share_prefix)  # fmt: skip
        update_s = time.perf_counter() - t0
        generated = sum(r.model_tokens for r in rows)
        return {"groups": groups, "tokens": tokens, "rows": len(rows), "generated": generated,
                "forwarded": sum(len(r.ids) for r in rows), "prompt": len(rows[0].ids) - tokens,
                "laid": laid_tokens(rows, rl),
                "sample_s": sample_s, "update_s": update_s, "passes": self.policy.passes - passes,
                "loss": float(metrics["loss"])}  # fmt: skip


def laid_tokens(rows: list[Any], rl: Any) -> int:
    """Tokens the update's forward lays down: its packed micro-batches (``plan_micro_batches``), a group's
    shared prompt once per micro-batch it appears in, plus every row's completion."""
    from verigym.train import packing

    starts = packing.row_starts(rows)
    if not rl.packing:
        return sum(len(r.ids) for r in rows)
    micros = packing.plan_micro_batches(
        rows, starts, share_prefix=rl.share_prefix, budget=rl.pack_tokens, at_least=rl.grad_accum
    )
    total = 0
    for micro in micros:
        seen: set[tuple[int, ...]] = set()
        for i in micro:
            prefix = tuple(rows[i].ids[: starts[i]])
            if prefix not in seen or not rl.share_prefix:
                total += len(prefix)
                seen.add(prefix)
            total += len(rows[i].ids) - starts[i]
    return total


def line_fit(xs: list[float], ys: list[float]) -> tuple[float, float, float]:
    """Least squares y = a + b·x: (a, b, R²)."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    a = my - b * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - a - b * x) ** 2 for x, y in zip(xs, ys, strict=True))
    return a, b, 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0


def growth(label: str, unit: str, xs: list[float], ys: list[float]) -> dict[str, Any]:
    """Print and return how ``ys`` (seconds) grows with ``xs`` (units of work)."""
    a, b, r2 = line_fit(xs, ys)
    per = [y / x for x, y in zip(xs, ys, strict=True)]
    marg = [(ys[i] - ys[i - 1]) / (xs[i] - xs[i - 1]) for i in range(1, len(xs))]
    print(f"  {label}: line {a:.2f} s + {b * 1e3:.3f} ms × {unit} (R² {r2:.4f}); per {unit} largest ÷ smallest "
          f"{per[-1] / per[0]:.2f}; marginal ms per {unit} by interval "
          f"{', '.join(f'{m * 1e3:.3f}' for m in marg)}")  # fmt: skip
    return {"intercept_s": a, "slope_s": b, "r2": r2, "per_unit_ratio": per[-1] / per[0], "marginal_s": marg}


def run_rl(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    points = [(g, RECIPE_TOKENS) for g in args.groups]
    points += [(RECIPE_GROUPS, n) for n in args.lengths if (RECIPE_GROUPS, n) not in points]
    bench = RLBench(args.model, args.seed)
    w = bench.point(min(args.groups), RECIPE_TOKENS)
    print(f"RL: warm-up {w['groups']}×8 at {w['tokens']} tokens: sampling {w['sample_s']:.2f}s, update "
          f"{w['update_s']:.2f}s; torch threads {torch.get_num_threads()}", flush=True)  # fmt: skip
    runs: dict[tuple[int, int], list[dict[str, Any]]] = {p: [] for p in points}
    for r in range(args.rounds):
        for g, n in points if r % 2 == 0 else points[::-1]:
            res = bench.point(g, n)
            runs[(g, n)].append(res)
            print(f"round {r + 1} {g:2d} groups × {n:3d} tokens: sampling {res['sample_s']:6.2f}s "
                  f"({res['passes']} pass), update {res['update_s']:6.2f}s; load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
    med: dict[tuple[int, int], dict[str, Any]] = {}
    for p, rs in runs.items():
        med[p] = {**rs[0], **{k: statistics.median(x[k] for x in rs) for k in ("sample_s", "update_s")}}
        med[p]["sample_range"] = [min(x["sample_s"] for x in rs), max(x["sample_s"] for x in rs)]
        med[p]["update_range"] = [min(x["update_s"] for x in rs), max(x["update_s"] for x in rs)]
    print("\n| groups × 8 | tokens | rows | generated = trained tokens | forwarded tokens | sampling s (range) "
          "| ms / generated token | update s (range) | ms / trained token | ms / forwarded token | laid-down tokens | ms / laid-down token | step s |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for (g, n), m in med.items():
        print(f"| {g} | {n} | {m['rows']} | {m['generated']} | {m['forwarded']} "
              f"| {m['sample_s']:.2f} ({m['sample_range'][0]:.2f}–{m['sample_range'][1]:.2f}) "
              f"| {m['sample_s'] / m['generated'] * 1e3:.2f} "
              f"| {m['update_s']:.2f} ({m['update_range'][0]:.2f}–{m['update_range'][1]:.2f}) "
              f"| {m['update_s'] / m['generated'] * 1e3:.2f} | {m['update_s'] / m['forwarded'] * 1e3:.2f} "
              f"| {m['laid']} | {m['update_s'] / m['laid'] * 1e3:.2f} "
              f"| {m['sample_s'] + m['update_s']:.2f} |")  # fmt: skip
    fits: dict[str, Any] = {}
    for axis, pts in (("groups", [(g, RECIPE_TOKENS) for g in args.groups]),
                      ("length", [(RECIPE_GROUPS, n) for n in args.lengths])):  # fmt: skip
        if len(pts) < 2:
            continue
        print(f"\nalong {axis} ({', '.join(f'{g}×8 at {n}' for g, n in pts)}):")
        gen = [float(med[p]["generated"]) for p in pts]
        fwd = [float(med[p]["forwarded"]) for p in pts]
        laid = [float(med[p]["laid"]) for p in pts]
        fits[axis] = {
            "sampling_per_generated": growth("sampling", "generated token", gen, [med[p]["sample_s"] for p in pts]),
            "update_per_trained": growth("update", "trained token", gen, [med[p]["update_s"] for p in pts]),
            "update_per_forwarded": growth("update", "forwarded token", fwd, [med[p]["update_s"] for p in pts]),
            "update_per_laid": growth("update", "laid-down token", laid, [med[p]["update_s"] for p in pts]),
        }  # fmt: skip
    del bench
    return {"points": {f"{g}x{n}": m for (g, n), m in med.items()}, "fits": fits}


def run_serve(args: argparse.Namespace) -> dict[str, Any]:
    from _serve_bench import percentile, run_level, verigym_server
    from serve_vs_llamacpp import prompt_order
    from verigym.policies.catalogue import resolve

    prompts = prompt_order(args.seed)
    model_dir = str(resolve(args.model))
    levels: dict[int, list[tuple[float, list[Any]]]] = {c: [] for c in args.concurrency}
    with tempfile.TemporaryDirectory(prefix="scaling-serve-") as tmp:
        for r in range(args.serve_rounds):
            server = verigym_server(model_dir, args.serve_threads, Path(tmp) / f"serve-{r}.log")
            server.start(300.0)
            try:
                top = max(args.concurrency)
                asyncio.run(run_level(server.url, server.model_id, prompts, 1, 1, 8, {}))  # warm-up
                asyncio.run(run_level(server.url, server.model_id, prompts, top, top, 8, {}))
                for c in args.concurrency if r % 2 == 0 else args.concurrency[::-1]:
                    n = max(8, args.waves * c)
                    wall, replies = asyncio.run(
                        run_level(server.url, server.model_id, prompts, c, n, args.tokens, {})
                    )
                    levels[c].append((wall, replies))
                    tokens = sum(x.completion_tokens for x in replies)
                    print(f"serve round {r + 1} c={c:<3d} {n} requests in {wall:6.2f}s: {tokens / wall:6.1f} "
                          f"tokens/s; load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
            finally:
                server.stop()
    print("\n| concurrency | requests a round | completion tokens/s (rounds' range) | × the level before "
          "| p50 latency s | p95 latency s | mean completion tokens |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    out: dict[str, Any] = {}
    prev = None
    for c in args.concurrency:
        replies = [x for _, rs in levels[c] for x in rs]
        rate = sum(x.completion_tokens for x in replies) / sum(w for w, _ in levels[c])
        rates = [sum(x.completion_tokens for x in rs) / w for w, rs in levels[c]]
        lat = [x.latency_s for x in replies]
        gain = rate / prev if prev else float("nan")
        out[str(c)] = {"tokens_per_s": rate, "round_tokens_per_s": rates, "p50_s": percentile(lat, 50),
                       "p95_s": percentile(lat, 95), "gain": gain,
                       "mean_completion_tokens": statistics.fmean(x.completion_tokens for x in replies)}  # fmt: skip
        print(f"| {c} | {max(8, args.waves * c)} | {rate:.1f} ({min(rates):.1f}–{max(rates):.1f}) "
              f"| {'–' if prev is None else f'{gain:.2f}×'} | {out[str(c)]['p50_s']:.2f} | {out[str(c)]['p95_s']:.2f} "
              f"| {out[str(c)]['mean_completion_tokens']:.1f} |")  # fmt: skip
        prev = rate
    flat = next((c for c in args.concurrency[1:] if out[str(c)]["gain"] < 1.1), None)
    print(f"\nthroughput stops growing (< 1.1× the level before) at concurrency {flat}" if flat else
          "\nthroughput grows ≥ 1.1× at every level")  # fmt: skip
    return {"levels": out, "flat_from": flat}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ints = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--rounds", type=int, default=1, help="RL rounds over the points (2: a spread)")
    ap.add_argument("--groups", type=ints, default=[4, 8, 16], help="groups of 8 at 16 tokens")
    ap.add_argument("--lengths", type=ints, default=[16, 64, 256], help="completion tokens at 8 groups")
    ap.add_argument("--serve-rounds", type=int, default=1)
    ap.add_argument("--concurrency", type=ints, default=[1, 2, 4, 8, 16, 32, 64, 128])
    ap.add_argument("--tokens", type=int, default=64, help="max_tokens of a serve reply")
    ap.add_argument("--serve-threads", type=int, default=2)
    ap.add_argument(
        "--waves", type=int, default=2, help="serve requests a level: max(8, waves × concurrency)"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", choices=("rl", "serve"))
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = ap.parse_args()
    print(
        f"{' '.join(sys.argv)}\n{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; seed {args.seed}",
        flush=True,
    )
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    if args.only in (None, "rl"):
        out["rl"] = run_rl(args)
    if args.only in (None, "serve"):
        out["serve"] = run_serve(args)
    print(f"\ntook {time.perf_counter() - t0:.0f}s; load at the end {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
