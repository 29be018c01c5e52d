"""Remote against local environment throughput (issue 39 item 6): ``calc`` in this process against the
same ``calc`` served by ``verigym env-server`` in its own process, through each protocol.

Three sides run the same episodes (``--episodes`` tasks, seed 0) through ``verigym.runner.run_rollouts``
at ``--concurrency`` sessions at once (64), with the same policy:

- ``local``: ``load_env("calc")``, the harness in this process;
- ``openenv``: ``load_env(URL)``, OpenEnv over ``WS /ws`` (one connection per episode);
- ``ors``: ``load_env("ors+" + URL)``, the Open Reward Standard (``/create``, ``/prompt``,
  ``/task_tools``, one SSE ``/call`` per tool call and one for the answer, ``/delete``).

The server is ``verigym env-server calc`` as a user starts it (another process, so the client's and the
server's Python each have their own interpreter). The sides alternate round by round (``local openenv
ors``, then reversed, ...), each warmed up once first. Throughput is episodes per second of wall time
per round; the figure is the median over rounds of remote / local in the same round, with its range.

Policies (``--policies``):

- ``tiny`` (the target's "fast policy"): the tiny model in this process (``LocalPolicy``, batched across
  the concurrent sessions, ``max_tokens`` ``--max-tokens``): a real model whose turns cost little;
- ``oracle``: calc's scripted oracle, which costs nothing: the ratio is then the env-server's whole
  cost against an in-process harness (a floor, not the target).

Target: remote >= 0.8x local throughput with the fast policy at 64 concurrent sessions, per protocol:
MET / NOT MET. ``--json`` prints every figure as one JSON object.

    python benchmarks/envserver_overhead.py [--rounds 5] [--episodes 256] [--policies tiny,oracle]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from verigym.envs.base import Environment  # noqa: E402
from verigym.envs.registry import load_env  # noqa: E402
from verigym.policies.base import Policy  # noqa: E402
from verigym.runner import run_rollouts  # noqa: E402
from verigym.types import Sampling  # noqa: E402

TARGET = 0.8
SIDES = ("local", "openenv", "ors")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(port: int, threads: int) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "verigym", "env-server", "calc", "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 120
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"verigym env-server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                return proc
        except OSError:
            if time.monotonic() > end:
                proc.kill()
                raise SystemExit("verigym env-server never answered /health") from None
            time.sleep(0.2)


async def one_side(
    env: Environment, policy: Policy, tasks: list[Any], concurrency: int, max_tokens: int
) -> dict[str, float]:
    sampling = Sampling(temperature=1.0, max_tokens=max_tokens, seed=0)
    start = time.perf_counter()
    records = await run_rollouts(
        env,
        policy,
        tasks,
        samples_per_task=1,
        sampling=sampling,
        concurrency=concurrency,
        env_name="calc",
        model_name="bench",
    )
    wall = time.perf_counter() - start
    errors = sum(r.error is not None for r in records)
    rewards = [r.score.reward for r in records if r.score.reward is not None]
    return {
        "episodes_per_s": len(records) / wall,
        "wall_s": wall,
        "errors": float(errors),
        "reward_mean": sum(rewards) / max(len(rewards), 1),
    }


def make_policy(kind: str, max_tokens: int) -> Policy:
    if kind == "oracle":
        policy = load_env("calc").oracle_policy()
        assert policy is not None
        return policy
    from verigym.policies import tiny
    from verigym.policies.local import LocalPolicy

    path = tiny.create("tiny", Path(tempfile.mkdtemp()) / "tiny", seed=0)
    return LocalPolicy.from_pretrained(path, device="cpu")


async def measure(args: argparse.Namespace, url: str, kind: str) -> dict[str, Any]:
    envs: dict[str, Environment] = {
        "local": load_env("calc"),
        "openenv": load_env(url),
        "ors": load_env(f"ors+{url}"),
    }
    policy = make_policy(kind, args.max_tokens)
    tasks = envs["local"].tasks(args.episodes, seed=0)
    for side in SIDES:  # warm-up: imports, connections, the model's first batches
        await one_side(envs[side], policy, tasks[: args.concurrency], args.concurrency, args.max_tokens)
    rounds: list[dict[str, dict[str, float]]] = []
    for r in range(args.rounds):
        order = SIDES if r % 2 == 0 else tuple(reversed(SIDES))
        row = {}
        for side in order:
            row[side] = await one_side(envs[side], policy, tasks, args.concurrency, args.max_tokens)
        rounds.append(row)
        shown = "  ".join(f"{s} {row[s]['episodes_per_s']:7.1f}/s" for s in SIDES)
        print(f"  [{kind}] round {r + 1}: {shown}", flush=True)
    for env in envs.values():
        close = getattr(env, "aclose", None)
        if close is not None:
            await close()
    out: dict[str, Any] = {"rounds": rounds, "sides": {}}
    for side in SIDES:
        rates = [row[side]["episodes_per_s"] for row in rounds]
        errors = sum(row[side]["errors"] for row in rounds)
        entry: dict[str, Any] = {"median_episodes_per_s": statistics.median(rates), "errors": errors}
        if side != "local":
            ratios = [row[side]["episodes_per_s"] / row["local"]["episodes_per_s"] for row in rounds]
            entry |= {
                "ratio_median": statistics.median(ratios),
                "ratio_min": min(ratios),
                "ratio_max": max(ratios),
            }
        out["sides"][side] = entry
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--episodes", type=int, default=256, help="episodes per side per round")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=8, help="the tiny model's max tokens a turn")
    ap.add_argument("--policies", default="tiny,oracle")
    ap.add_argument("--threads", type=int, default=1, help="torch threads in this process")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    port = free_port()
    server = start_server(port, args.threads)
    url = f"http://127.0.0.1:{port}"
    results: dict[str, Any] = {}
    try:
        for kind in [p.strip() for p in args.policies.split(",") if p.strip()]:
            results[kind] = asyncio.run(measure(args, url, kind))
    finally:
        server.terminate()
        server.wait(10)
    print(
        f"\ncalc, {args.episodes} episodes a side a round, {args.concurrency} concurrent, {args.rounds} rounds"
    )
    for kind, result in results.items():
        local = result["sides"]["local"]["median_episodes_per_s"]
        print(f"{kind}: local {local:.1f} episodes/s")
        for side in SIDES[1:]:
            s = result["sides"][side]
            verdict = ""
            if kind == "tiny":
                verdict = "MET" if s["ratio_median"] >= TARGET else "NOT MET"
                verdict = f"  target >= {TARGET}x: {verdict}"
            print(
                f"  {side:8s} {s['median_episodes_per_s']:7.1f} episodes/s  ratio {s['ratio_median']:.2f}x "
                f"(rounds {s['ratio_min']:.2f}-{s['ratio_max']:.2f}), errors {int(s['errors'])}{verdict}"
            )
    if args.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
