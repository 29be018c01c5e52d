"""``verigym serve`` against llama.cpp's ``llama-server`` on the same f32 weights (issue 43 item 3).

``make bench-venv`` builds ``llama-server`` from the llama.cpp tree that llama-cpp-python 0.3.36's source
package vendors and converts SmolLM2-135M-Instruct to ``.bench/llamacpp/smollm2-135m-instruct-f32.gguf``
with that tree's converter, so both servers hold the same weights in float32. Each side runs as a fresh
subprocess on 127.0.0.1 for every (round, concurrency): ``verigym serve DIR --threads T --dtype float32``
(this Python's verigym) and ``llama-server -m GGUF -np N -c N*ctx -t T -tb T --jinja`` (one slot per
client, the GGUF's own chat template), warmed up before the clock starts (one request, then N at once,
8 tokens each).

The client (``_serve_bench.run_level``, shared with the other serving benchmarks) is the official
``openai.AsyncOpenAI``: greedy (``temperature=0``) chat completions of ``--tokens`` tokens, each a user
question from a fixed list (request i asks the i-th of a seeded shuffle; both sides and every round ask
the same sequence), N closed-loop workers. ``llama-server`` gets
``ignore_eos`` so every reply is exactly ``--tokens`` long; ``verigym serve`` has no per-request way to
ignore EOS (no ``ignore_eos``/``min_tokens`` field), so the questions are ones whose greedy SmolLM2
replies run past 64 tokens, and tokens/s counts the completion tokens each reply's ``usage`` reports
(the table shows how many replies stopped at the limit). Rounds alternate which side goes first.

Prints per concurrency and side: completion tokens/s (over all rounds, and the rounds' range),
p50/p95 request latency, mean prompt and completion tokens, then the text agreement between the sides
(replies identical, and the common prefix in SmolLM2 tokens: both sides decode greedily in float32 but
round differently, so long replies may part after some tokens), the ratio verigym / llama.cpp and
MET / NOT MET against the targets: ≥ 1.0× at every concurrency, ≥ 1.5× at 32; after every round, over
the rounds so far (a run cut short leaves its table). ``--json FILE`` writes it all (rewritten each round).

    python benchmarks/serve_vs_llamacpp.py [--rounds 3] [--concurrency 1,8,32] [--tokens 64] [--threads 2]
                                           [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shlex
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _serve_bench import (  # the serving benchmarks' shared pieces (a sibling module)
    Reply,
    Server,
    ServerFailed,
    cpu_ticks,
    percentile,
    run_level,
    verigym_server,
)

REPO = Path(__file__).resolve().parents[1]
LLAMA_SERVER = REPO / ".bench/llamacpp/build/bin/llama-server"
GGUF = REPO / ".bench/llamacpp/smollm2-135m-instruct-f32.gguf"
VERIGYM, LLAMA = "verigym", "llama.cpp"
TARGET_EVERY, TARGET_AT_32 = 1.0, 1.5

# User questions whose greedy SmolLM2-135M-Instruct replies run past 64 tokens (checked in-process).
PROMPTS: tuple[str, ...] = (
    "Write a short poem about the sea.",
    "Explain why the sky is blue.",
    "Give me three tips for learning to cook.",
    "Describe a busy train station in the morning.",
    "What are the benefits of regular exercise?",
    "Tell me a short story about a lost cat.",
    "List some good habits for better sleep.",
    "Describe the taste of a fresh strawberry.",
    "Why do leaves change colour in autumn?",
    "Write a friendly note to a new neighbour.",
    "Explain what a computer program is to a child.",
    "What makes a good team leader?",
    "Describe a walk through a forest in winter.",
    "Give advice to someone starting their first job.",
    "Explain how rain forms.",
    "How does a refrigerator keep food cold?",
    "What should I pack for a week-long hiking trip?",
    "Describe the life cycle of a butterfly.",
    "Why is it important to drink enough water?",
    "Write a letter thanking a teacher.",
    "Explain how the internet sends a message from one computer to another.",
    "What are some ways to save money on groceries?",
    "Describe a city market on a Saturday afternoon.",
)


@dataclass
class Level:
    """One side at one concurrency, over the rounds (one run a round)."""

    walls: list[float] = field(default_factory=list)
    runs: list[list[Reply]] = field(default_factory=list)
    steal: list[float] = field(default_factory=list)

    @property
    def replies(self) -> list[Reply]:
        return [r for run in self.runs for r in run]

    def tokens_per_s(self) -> float:
        return sum(r.completion_tokens for r in self.replies) / sum(self.walls)

    def round_rates(self) -> list[float]:
        return [
            sum(r.completion_tokens for r in run) / w for run, w in zip(self.runs, self.walls, strict=True)
        ]

    def latency(self, q: int) -> float:
        return percentile([r.latency_s for r in self.replies], q)


def prompt_order(seed: int) -> list[str]:
    """The questions in the seeded order requests take them (request i: ``order[i % len]``)."""
    order = list(PROMPTS)
    random.Random(seed).shuffle(order)
    return order


def llama_server(
    binary: Path, gguf: Path, threads: int, slots: int, ctx: int, log: Path, extra: list[str]
) -> Server:
    argv = [str(binary), "-m", str(gguf), "-np", str(slots), "-c", str(slots * ctx), "-t", str(threads)]
    argv += ["-tb", str(threads), "--jinja", "--host", "127.0.0.1", "--no-webui", *extra]
    return Server(LLAMA, argv, dict(os.environ), log)


def measure(
    server: Server, prompts: list[str], concurrency: int, requests: int, args: argparse.Namespace
) -> tuple[float, list[Reply], float]:
    """Start ``server``, warm it (1 request, then ``concurrency`` at once, 8 tokens each), time one level,
    stop it."""
    extra = {"ignore_eos": True} if server.side == LLAMA else {}
    server.start(args.start_timeout)
    try:
        warm = min(8, args.tokens)  # short replies: the paths are warm before the clock starts
        asyncio.run(run_level(server.url, server.model_id, prompts, 1, 1, warm, extra))
        asyncio.run(run_level(server.url, server.model_id, prompts, concurrency, concurrency, warm, extra))
        steal0, total0 = cpu_ticks()
        wall, replies = asyncio.run(
            run_level(server.url, server.model_id, prompts, concurrency, requests, args.tokens, extra)
        )
        steal1, total1 = cpu_ticks()
    finally:
        server.stop()
    return wall, replies, 100.0 * (steal1 - steal0) / max(1, total1 - total0)


def agreement(tok: Any, a: Level, b: Level) -> dict[str, float]:
    """Replies identical, and the common prefix in tokens (mean, min), over every (round, request) pair."""
    same, prefixes = 0, []
    for run_a, run_b in zip(a.runs, b.runs, strict=True):
        for x, y in zip(run_a, run_b, strict=True):
            same += x.text == y.text
            ids_a, ids_b = (
                tok.encode(x.text, add_special_tokens=False),
                tok.encode(y.text, add_special_tokens=False),
            )
            n = 0
            while n < min(len(ids_a), len(ids_b)) and ids_a[n] == ids_b[n]:
                n += 1
            prefixes.append(n)
    return {"identical": same / len(prefixes), "pairs": len(prefixes), "prefix_mean": statistics.fmean(prefixes),
            "prefix_min": min(prefixes), "prefix_median": statistics.median(prefixes)}  # fmt: skip


def report(levels: dict[str, dict[int, Level]], tok: Any, args: argparse.Namespace) -> dict[str, Any]:
    print("\n| concurrency | side | completion tokens/s (rounds' range) | p50 latency s | p95 latency s "
          "| prompt / completion tokens (mean) | at the token limit | CPU steal % |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    out: dict[str, Any] = {"levels": {}, "verdicts": {}}
    for c in args.concurrency:
        for side, label in ((VERIGYM, "verigym serve"), (LLAMA, "llama-server")):
            lv = levels[side][c]
            rates = lv.round_rates()
            n_cap = sum(r.finish_reason == "length" for r in lv.replies)
            print(f"| {c} | {label} | {lv.tokens_per_s():.1f} ({min(rates):.1f}–{max(rates):.1f}) "
                  f"| {lv.latency(50):.2f} | {lv.latency(95):.2f} "
                  f"| {statistics.fmean(r.prompt_tokens for r in lv.replies):.1f} / "
                  f"{statistics.fmean(r.completion_tokens for r in lv.replies):.1f} "
                  f"| {n_cap}/{len(lv.replies)} | {statistics.fmean(lv.steal):.0f} |")  # fmt: skip
        v, ll = levels[VERIGYM][c], levels[LLAMA][c]
        ratio = v.tokens_per_s() / ll.tokens_per_s()
        agree = agreement(tok, v, ll)
        print(f"| {c} | **verigym ÷ llama.cpp** | **{ratio:.2f}×** (rounds "
              f"{', '.join(f'{x / y:.2f}' for x, y in zip(v.round_rates(), ll.round_rates(), strict=True))}) "
              f"| {v.latency(50) / ll.latency(50):.2f}× | {v.latency(95) / ll.latency(95):.2f}× "
              f"| identical {agree['identical'] * 100:.0f}% of {agree['pairs']}; common prefix "
              f"{agree['prefix_mean']:.1f} tokens mean, {agree['prefix_median']:.0f} median, {agree['prefix_min']} min | | |")  # fmt: skip
        out["levels"][str(c)] = {
            side: {"tokens_per_s": lv.tokens_per_s(), "round_tokens_per_s": lv.round_rates(),
                   "p50_s": lv.latency(50), "p95_s": lv.latency(95), "steal_pct": lv.steal,
                   "mean_completion_tokens": statistics.fmean(r.completion_tokens for r in lv.replies),
                   "mean_prompt_tokens": statistics.fmean(r.prompt_tokens for r in lv.replies)}
            for side, lv in ((VERIGYM, v), (LLAMA, ll))
        }  # fmt: skip
        out["levels"][str(c)]["ratio"] = ratio
        out["levels"][str(c)]["agreement"] = agree
    print()
    for c in args.concurrency:
        ratio = out["levels"][str(c)]["ratio"]
        target = TARGET_AT_32 if c == 32 else TARGET_EVERY
        for t in sorted({TARGET_EVERY, target}):
            met = ratio >= t
            out["verdicts"][f"c{c}>={t}"] = met
            print(
                f"verigym / llama.cpp at {c} concurrent: {ratio:.2f}× (target ≥ {t:.1f}×): {'MET' if met else 'NOT MET'}"
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument(
        "--model", default="smollm2-135m-instruct", help="catalogue name or model directory (verigym)"
    )
    ap.add_argument("--gguf", type=Path, default=GGUF, help="the same model as a GGUF (llama.cpp)")
    ap.add_argument("--llama-server", type=Path, default=LLAMA_SERVER)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8, 32])
    ap.add_argument(
        "--requests", type=int, default=0, help="requests per level a round (0: max(8, 2 × concurrency))"
    )
    ap.add_argument("--tokens", type=int, default=64, help="max_tokens of every reply")
    ap.add_argument("--threads", type=int, default=2, help="threads of each server")
    ap.add_argument("--ctx", type=int, default=256, help="llama-server context per slot (prompt + reply)")
    ap.add_argument("--seed", type=int, default=0, help="the questions' order")
    ap.add_argument("--llama-args", default="", help="more llama-server flags, e.g. '--poll 0'")
    ap.add_argument("--start-timeout", type=float, default=300.0)
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = ap.parse_args()
    for path in (args.llama_server, args.gguf):
        if not path.exists():
            sys.exit(f"{path} is missing: run `make bench-venv` (builds llama-server, converts the GGUF)")

    from transformers import AutoTokenizer

    from verigym.policies.catalogue import resolve

    model_dir = str(resolve(args.model))
    tok = AutoTokenizer.from_pretrained(model_dir)
    prompts = prompt_order(args.seed)
    print(f"model {model_dir} / {args.gguf}; threads {args.threads}; {args.tokens} tokens; concurrency "
          f"{args.concurrency}; rounds {args.rounds}; seed {args.seed}; {os.cpu_count()} CPUs; "
          f"load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
    levels = {side: {c: Level() for c in args.concurrency} for side in (VERIGYM, LLAMA)}
    with tempfile.TemporaryDirectory(prefix="serve-vs-llamacpp-") as tmp:
        for r in range(args.rounds):
            order = (VERIGYM, LLAMA) if r % 2 == 0 else (LLAMA, VERIGYM)
            for c in args.concurrency:
                requests = args.requests or max(8, 2 * c)
                for side in order:
                    log = Path(tmp) / f"{side}-{r}-{c}.log"
                    server = (verigym_server(model_dir, args.threads, log) if side == VERIGYM
                              else llama_server(args.llama_server, args.gguf, args.threads, c, args.ctx, log, shlex.split(args.llama_args)))  # fmt: skip
                    try:
                        wall, replies, steal = measure(server, prompts, c, requests, args)
                    except (ServerFailed, openai.APIError) as exc:
                        sys.exit(
                            f"{side} could not run: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                        )
                    lv = levels[side][c]
                    lv.walls.append(wall)
                    lv.runs.append(replies)
                    lv.steal.append(steal)
                    tokens = sum(x.completion_tokens for x in replies)
                    print(f"round {r + 1} c={c:<3d} {side:9s} {requests} requests in {wall:6.2f}s: "
                          f"{tokens / wall:7.1f} tokens/s (load {os.getloadavg()[0]:.2f})", flush=True)  # fmt: skip
            # the table so far after every round: a run cut short still leaves its figures
            print(f"\nafter round {r + 1} of {args.rounds}: load {os.getloadavg()[0]:.2f}", flush=True)
            out = report(levels, tok, args)
            if args.json:
                out["rounds_done"] = r + 1
                args.json.write_text(
                    json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, **out}, indent=1)
                )
            print(flush=True)


if __name__ == "__main__":
    main()
