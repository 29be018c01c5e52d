"""``verigym serve`` against ``transformers serve``: one model directory, the same chat requests.

Both servers run as subprocesses on 127.0.0.1 (a free port each, one server at a time), fully offline
(``HF_HUB_OFFLINE=1``), on CPU in float32 with the same torch threads (``--threads N`` for verigym;
``torch.set_num_threads(N)`` and ``OMP_NUM_THREADS=N`` for transformers, which has no thread flag).
``transformers serve`` preloads the directory (its ``FORCE_MODEL`` argument) and runs with
``--continuous-batching`` by default (paged attention, requests join the running batch at each step;
its paged cache sized by ``CB_SIZING`` below, ``--tf-args`` to change; ``--tf-mode sequential`` is its
own default mode, one ``model.generate()`` at a time). ``verigym serve`` runs as its CLI does
(continuous batching: a request joins the running pass at its next step when the cache has room).

The client (``_serve_bench.run_level``, shared with the other serving benchmarks) is the official
``openai.AsyncOpenAI``. Every request is a chat completion of one of a fixed list of short user prompts, ``temperature=0`` (greedy), ``max_tokens`` 64. ``verigym serve`` has
no per-request way to ignore EOS (``stop_token_ids=[]`` is a ``LocalPolicy`` argument, not a flag), so
completions stop at EOS or 64 tokens: the script reports the mean completion tokens of each side, how
many of the first round's completions are identical on both sides, and compares completion tokens/s. Each concurrency
level (1, 8, 32 by default, with 8 / 32 / 64 requests a round) is a closed loop: N workers each send
their next request as soon as the previous one returns. Rounds alternate the side that goes first
(A B, B A, ...), each side a fresh server process warmed up before the clock starts.

    python benchmarks/serve_vs_transformers.py [--model smollm2-135m-instruct] [--rounds 2] [--threads 2]

Prints per concurrency and side: completion tokens/s, requests/s, p50/p95 latency, mean completion
tokens, the hypervisor's CPU steal while it ran (a noisy neighbour shows there), and the
verigym / transformers ratios; then MET / NOT MET against the targets (issue 23
item 5): verigym ≥ 2× transformers serve's tokens/s at concurrency 32, and verigym's p50 latency at
concurrency 1 no worse than transformers serve's. When ``transformers serve`` cannot run here the
script says why in one line (``transformers serve could not run: ...``) and exits with status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import openai

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _serve_bench import (  # the serving benchmarks' shared pieces (a sibling module)
    VERIGYM,
    Reply,
    Server,
    ServerFailed,
    cpu_ticks,
    percentile,
    run_level,
    verigym_server,
)

TRANSFORMERS = "transformers"
TARGET_SPEEDUP_AT_32 = 2.0

PROMPTS: tuple[str, ...] = (
    "Write a short poem about the sea.",
    "Explain why the sky is blue.",
    "Give me three tips for learning to cook.",
    "Describe a busy train station in the morning.",
    "What are the benefits of regular exercise?",
    "Tell me a short story about a lost cat.",
    "Explain how a bicycle works.",
    "List some good habits for better sleep.",
    "Describe the taste of a fresh strawberry.",
    "Why do leaves change colour in autumn?",
    "Write a friendly note to a new neighbour.",
    "Explain what a computer program is to a child.",
    "What makes a good team leader?",
    "Describe a walk through a forest in winter.",
    "Give advice to someone starting their first job.",
    "Explain how rain forms.",
)

# The paged KV cache's sizing for continuous batching on CPU. Left to itself, `transformers serve` sizes the
# cache from free RAM (90% of it: a 14 GB cache for this 135M model on a 23 GB machine) with 8192-token
# batches. A sweep on the idle machine (c=1 and c=32, 32 tokens) measured that default, 64 blocks of 256
# tokens (sdpa or eager attention) and these 64-token pages within ±10% of each other at c=32,
# this one the fastest (70.5 tokens/s) with a 1.5 GB process; sequential `generate()` made 13 tokens/s.
CB_SIZING = "--cb-block-size 64 --cb-num-blocks 128 --cb-max-batch-tokens 1024"

# Runs `transformers serve` with torch's thread count set in-process (it has no thread flag).
TF_LAUNCHER = (
    "import sys, torch; torch.set_num_threads(int(sys.argv[1])); "
    "from transformers.cli.transformers import main; "
    "sys.argv = ['transformers', 'serve', *sys.argv[2:]]; sys.exit(main())"
)


@dataclass
class LevelRun:
    wall_s: float
    results: list[Reply]
    steal_pct: float = 0.0  # CPU time the hypervisor took (``/proc/stat`` steal) while it ran


@dataclass
class Tally:
    """One side at one concurrency level, over all rounds."""

    runs: list[LevelRun] = field(default_factory=list)

    @property
    def results(self) -> list[Reply]:
        return [r for run in self.runs for r in run.results]

    @property
    def wall_s(self) -> float:
        return sum(run.wall_s for run in self.runs)

    def tokens_per_s(self) -> float:
        return sum(r.completion_tokens for r in self.results) / self.wall_s

    def requests_per_s(self) -> float:
        return len(self.results) / self.wall_s

    def round_tokens_per_s(self) -> list[float]:
        return [sum(r.completion_tokens for r in run.results) / run.wall_s for run in self.runs]

    def percentile(self, q: int) -> float:
        return percentile([r.latency_s for r in self.results], q)

    def steal_pct(self) -> float:
        return statistics.fmean(run.steal_pct for run in self.runs)

    def mean_tokens(self) -> float:
        return statistics.fmean(r.completion_tokens for r in self.results)

    def capped(self) -> int:
        return sum(r.finish_reason == "length" for r in self.results)


def transformers_server(
    model_dir: str, threads: int, mode: str, python: str, extra: list[str], log: Path
) -> Server:
    argv = [python, "-c", TF_LAUNCHER, str(threads), model_dir, "--device", "cpu", "--dtype", "float32"]
    argv += ["--host", "127.0.0.1", "--log-level", "warning"]
    argv.append("--continuous-batching" if mode == "continuous-batching" else "--no-continuous-batching")
    if mode == "compile":
        argv.append("--compile")
    argv += extra
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(threads)}
    return Server(TRANSFORMERS, argv, env, log)


def _level(server: Server, concurrency: int, requests: int, args: argparse.Namespace) -> LevelRun:
    """One level's closed loop (``_serve_bench.run_level``) over ``PROMPTS``, ``--max-tokens`` each."""
    wall, replies = asyncio.run(
        run_level(server.url, server.model_id, PROMPTS, concurrency, requests, args.max_tokens,
                  timeout_s=args.request_timeout)
    )  # fmt: skip
    return LevelRun(wall, replies)


def parse_levels(text: str) -> list[tuple[int, int]]:
    """``"1:8,8:32,32:64"`` → [(concurrency, requests a round), ...]."""
    levels = []
    for part in text.split(","):
        concurrency, _, requests = part.partition(":")
        levels.append((int(concurrency), int(requests or concurrency)))
    return levels


def measure_side(
    server: Server, levels: list[tuple[int, int]], args: argparse.Namespace
) -> dict[int, LevelRun]:
    """Start ``server``, warm it up, run every level once, stop it."""
    print(f"  {server.side}: starting ({server.log.name})", flush=True)
    t0 = time.perf_counter()
    server.start(args.start_timeout)
    try:
        print(f"  {server.side}: up in {time.perf_counter() - t0:.1f}s as {server.model_id!r}", flush=True)
        warm = max(c for c, _ in levels)
        _level(server, 1, 2, args)
        _level(server, warm, warm, args)
        runs = {}
        for concurrency, requests in levels:
            steal0, total0 = cpu_ticks()
            run = _level(server, concurrency, requests, args)
            steal1, total1 = cpu_ticks()
            run.steal_pct = 100.0 * (steal1 - steal0) / max(1, total1 - total0)
            tokens = sum(r.completion_tokens for r in run.results)
            print(
                f"  {server.side:12s} c={concurrency:<3d} {requests:3d} requests in {run.wall_s:7.2f}s: "
                f"{tokens / run.wall_s:7.1f} tokens/s (CPU steal {run.steal_pct:.0f}%)",
                flush=True,
            )
            runs[concurrency] = run
        return runs
    finally:
        server.stop()


def same_texts(a: Tally, b: Tally) -> tuple[int, int]:
    """How many of the first round's completions are identical on both sides (greedy: they should be)."""
    first_a, first_b = a.runs[0].results, b.runs[0].results
    return sum(x.text == y.text for x, y in zip(first_a, first_b, strict=True)), len(first_a)


def report(levels: list[tuple[int, int]], tallies: dict[str, dict[int, Tally]], tf_label: str) -> bool:
    print()
    print(
        "| concurrency | requests (× rounds) | side | completion tokens/s (rounds' range) | requests/s | p50 latency s "
        "| p95 latency s | mean completion tokens | stopped at max_tokens | CPU steal % |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for concurrency, requests in levels:
        rounds = len(tallies[VERIGYM][concurrency].runs)
        for side, label in ((VERIGYM, "verigym serve"), (TRANSFORMERS, tf_label)):
            t = tallies[side][concurrency]
            spread = "–".join(f"{x:.0f}" for x in (min(t.round_tokens_per_s()), max(t.round_tokens_per_s())))
            print(
                f"| {concurrency} | {requests} × {rounds} | {label} | {t.tokens_per_s():.1f} ({spread}) "
                f"| {t.requests_per_s():.2f} | {t.percentile(50):.2f} | {t.percentile(95):.2f} "
                f"| {t.mean_tokens():.1f} | {t.capped()}/{len(t.results)} | {t.steal_pct():.0f} |"
            )
        v, f = tallies[VERIGYM][concurrency], tallies[TRANSFORMERS][concurrency]
        same, total = same_texts(v, f)
        print(
            f"| {concurrency} | | **verigym ÷ transformers** | **{v.tokens_per_s() / f.tokens_per_s():.2f}×** "
            f"| {v.requests_per_s() / f.requests_per_s():.2f}× | {v.percentile(50) / f.percentile(50):.2f}× "
            f"| {v.percentile(95) / f.percentile(95):.2f}× | {v.mean_tokens() / f.mean_tokens():.2f}× "
            f"| texts identical: {same}/{total} | |"
        )
    print()
    top = max(c for c, _ in levels)
    ok = True
    if 32 in tallies[VERIGYM]:
        v, f = tallies[VERIGYM][32], tallies[TRANSFORMERS][32]
        speedup = v.tokens_per_s() / f.tokens_per_s()
        met = speedup >= TARGET_SPEEDUP_AT_32
        ok &= met
        print(
            f"throughput at concurrency 32: verigym {v.tokens_per_s():.1f} vs transformers "
            f"{f.tokens_per_s():.1f} tokens/s = {speedup:.2f}× (target ≥ {TARGET_SPEEDUP_AT_32:.0f}×): "
            f"{'MET' if met else 'NOT MET'}"
        )
    else:
        print(f"throughput at concurrency 32: not measured (levels go up to {top})")
    if 1 in tallies[VERIGYM]:
        v, f = tallies[VERIGYM][1], tallies[TRANSFORMERS][1]
        met = v.percentile(50) <= f.percentile(50)
        ok &= met
        print(
            f"p50 latency at concurrency 1: verigym {v.percentile(50):.3f}s vs transformers "
            f"{f.percentile(50):.3f}s (target: no worse): {'MET' if met else 'NOT MET'}"
        )
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-instruct", help="catalogue name or model directory")
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads for both servers")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per side (first side alternates)")
    parser.add_argument("--levels", default="1:8,8:32,32:64", help="concurrency:requests a round, ...")
    parser.add_argument("--max-tokens", type=int, default=64, help="max_tokens of every request")
    parser.add_argument(
        "--tf-mode",
        default="continuous-batching",
        choices=["continuous-batching", "sequential", "compile"],
        help="transformers serve's generation mode (compile: sequential with --compile)",
    )
    parser.add_argument(
        "--tf-python", default=sys.executable, help="python whose transformers runs `transformers serve`"
    )
    parser.add_argument(
        "--tf-args",
        default=None,
        help=f"more `transformers serve` flags (default with continuous batching: {CB_SIZING!r}; else none)",
    )
    parser.add_argument("--start-timeout", type=float, default=300.0, help="seconds for a server to answer")
    parser.add_argument("--request-timeout", type=float, default=900.0, help="seconds for one request")
    args = parser.parse_args()
    if args.tf_args is None:
        args.tf_args = CB_SIZING if args.tf_mode == "continuous-batching" else ""

    import torch
    import transformers

    from verigym.policies.catalogue import resolve

    model_dir = str(resolve(args.model))
    levels = parse_levels(args.levels)
    tf_version = subprocess.run(
        [
            args.tf_python,
            "-c",
            "import transformers, torch; print(transformers.__version__, torch.__version__)",
        ],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    tf_label = "transformers serve"
    print(f"model: {model_dir}")
    print(
        f"verigym side: torch {torch.__version__}, transformers {transformers.__version__}; "
        f"transformers side: {args.tf_python} (transformers {' / torch '.join(tf_version) or '?'}); "
        f"openai {openai.__version__}; threads {args.threads}; levels {levels}; rounds {args.rounds}; "
        f"load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )

    tallies: dict[str, dict[int, Tally]] = {
        side: {c: Tally() for c, _ in levels} for side in (VERIGYM, TRANSFORMERS)
    }
    with tempfile.TemporaryDirectory(prefix="serve-vs-tf-") as tmp:
        logs = Path(tmp)
        for r in range(args.rounds):
            order = (VERIGYM, TRANSFORMERS) if r % 2 == 0 else (TRANSFORMERS, VERIGYM)
            print(f"round {r + 1}: {' then '.join(order)}", flush=True)
            for side in order:
                log = logs / f"{side}-{r}.log"
                server = (
                    verigym_server(model_dir, args.threads, log)
                    if side == VERIGYM
                    else transformers_server(
                        model_dir, args.threads, args.tf_mode, args.tf_python, shlex.split(args.tf_args), log
                    )
                )
                try:
                    runs = measure_side(server, levels, args)
                except (ServerFailed, openai.APIError) as exc:
                    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                    if side == TRANSFORMERS:
                        print(f"transformers serve could not run: {reason}")
                        sys.exit(2)
                    print(f"verigym serve could not run: {reason}")
                    sys.exit(1)
                for concurrency, run in runs.items():
                    tallies[side][concurrency].runs.append(run)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    print(f"transformers serve mode: {args.tf_mode} {args.tf_args}".rstrip())
    report(levels, tallies, tf_label)


if __name__ == "__main__":
    main()
