"""Where `verigym eval` spends a rollout: the client's main thread sampled by py-spy, by part.

Runs ``verigym.eval.run.evaluate`` (aiohttp transport by default; ``--transport sdk`` for the
SDK) against the instant server of ``eval_overhead.py``, under ``py-spy record`` (install it in
``.bench/venv``: ``.bench/venv/bin/pip install py-spy``), and splits the main thread's samples of
the run into parts, each also as µs per rollout (the share times the run's client CPU per rollout,
measured without the sampler). The innermost matching part wins, in the order printed.

    python benchmarks/eval_profile.py [--rollouts 8000] [--transport aiohttp] [--rate 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PY_SPY = HERE.parent / ".bench" / "venv" / "bin" / "py-spy"
PARTS: list[
    tuple[str, tuple[str, ...]]
] = [  # (part, frame markers); the first part whose marker is on the stack
    ("finish: summary.json + report.html", ("finish (verigym/eval/run.py",)),
    ("results.jsonl: serialise + write", ("ResultsWriter.write", "ResultsWriter.flush")),
    ("tally: summary aggregates + report examples", ("Tally.add",)),
    ("rubric: the grade (+ the thread hop of a user sync grader)", ("verigym/rubric.py",)),
    ("HTTP request (aiohttp, JSON dumps/loads)", ("_openai_transport.py",)),
    ("OpenAIPolicy wrapper (body, parse, retries)", ("policies/openai.py", "_openai_wire.py")),
    ("harness (MultiTurnEnv loop, trajectory)", ("verigym/envs/",)),
    ("runner (Record, per-sample seed, workers)", ("verigym/runner.py",)),
    (
        "aiohttp response and socket callbacks",
        ("selector_events", "client_proto", "streams.py", "client_reqrep"),
    ),
    ("event loop scheduling (asyncio)", ("",)),
]


def inner(n: int, transport: str, out: Path) -> None:
    """The profiled process: a warm-up eval, then ``n`` rollouts; writes the run's client CPU."""
    sys.path.insert(0, str(HERE))
    import eval_overhead as eo
    from verigym.runner import tuned_gc

    server, url = eo.start_server()
    try:
        with tuned_gc():
            _, total, cpu = asyncio.run(eo.verigym_eval(url, n, 64, transport))
    finally:
        server.terminate()
    out.write_text(json.dumps({"rollouts_per_s": n / total, "cpu_ms_per_rollout": 1e3 * cpu / n}))


def parts(raw: Path) -> tuple[collections.Counter[str], int]:
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        # the main thread's event loop, without the task generation and imports before the run
        if "MainThread" not in frames[0] or "run_until_complete" not in stack:
            continue
        if any(x in stack for x in ("ArithmeticEnv.tasks", "_find_and_load")):
            continue
        total += int(n)
        for name, markers in PARTS:
            if any(m in f for f in frames for m in markers):
                counts[name] += int(n)
                break
    return counts, total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rollouts", type=int, default=8000, help="rollouts in the profiled run (default 8000)")
    ap.add_argument("--transport", default="aiohttp", choices=("aiohttp", "sdk", "sdk-httpx"))
    ap.add_argument("--rate", type=int, default=1000, help="py-spy samples per second (default 1000)")
    ap.add_argument("--inner", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inner:
        inner(args.rollouts, args.transport, args.inner)
        return
    if not PY_SPY.exists():
        raise SystemExit(f"error: {PY_SPY} is missing: .bench/venv/bin/pip install py-spy")
    with tempfile.TemporaryDirectory() as tmp:
        plain, sampled, raw = Path(tmp) / "plain.json", Path(tmp) / "sampled.json", Path(tmp) / "raw.txt"
        me = [sys.executable, __file__, "--rollouts", str(args.rollouts), "--transport", args.transport]
        subprocess.run([*me, "--inner", str(plain)], check=True)  # CPU per rollout without the sampler
        start = time.perf_counter()
        spy = [str(PY_SPY), "record", "--threads", "-r", str(args.rate), "-f", "raw", "-o", str(raw), "--"]
        subprocess.run([*spy, *me, "--inner", str(sampled)], check=True, capture_output=True)
        measured = json.loads(plain.read_text())
        counts, total = parts(raw)
    cpu_us = 1e3 * measured["cpu_ms_per_rollout"]
    print(
        f"{args.rollouts} rollouts, transport {args.transport}: {measured['rollouts_per_s']:.0f} rollouts/s, "
        f"client CPU {cpu_us:.0f} us per rollout (unsampled run); {total} main-thread samples "
        f"({time.perf_counter() - start:.0f} s sampled run)"
    )
    for name, _ in PARTS:
        share = counts[name] / total if total else 0.0
        print(f"  {share:6.1%}  {share * cpu_us:6.1f} us/rollout  {name}")


if __name__ == "__main__":
    main()
