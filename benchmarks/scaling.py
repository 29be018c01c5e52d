"""Scaling curve (issue 17 item 6): cost per unit of work of an eval and of an RL step as the work grows.

Two workloads, each size in its own subprocess (so peak RSS of one size does not pollute another;
the peak is the child's ``ru_maxrss`` from ``os.wait4``):

  eval: ``verigym.eval.run.evaluate`` — the engine behind ``verigym eval``: runner + rubric +
        results.jsonl store + summary.json + report.html — on the built-in ``arithmetic`` env with a
        ``ScriptedPolicy`` that answers at once, at 50/200/800/3200 tasks. Unit: one rollout.
        Timed from the call to ``evaluate`` to its return (report written), after a 16-task warm-up.
  rl:   one ``RLTrainer`` step (rollouts through the harness with the tiny local model, rubric,
        advantages, loss, update) on ``arithmetic`` at 64/128/256/512 rows (group size 8, max 16
        tokens), after one warm-up step; the median of ``--steps`` steps. Unit: one row.

Sizes are interleaved round by round (every size once per round), and each size's median over rounds
is taken. Target: cost per unit stays flat — for each workload, the largest per-unit time over all
sizes ÷ the per-unit time at the smallest size ≤ 1.5, and the marginal peak RSS per unit of the last
interval ÷ that of the first ≤ 1.5 (memory may grow linearly, not super-linearly). Writes ``benchmarks/scaling.png``.

    python benchmarks/scaling.py [--rounds 2] [--steps 2] [--eval-sizes 50,200,800,3200] [--rl-rows 64,128,256,512]
                                 [--only eval|rl] [--png FILE]
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
from pathlib import Path

TARGET = 1.5
HERE = Path(__file__).resolve().parent


def eval_worker(n: int) -> dict[str, float]:
    import asyncio

    from verigym.envs.builtin.arithmetic import ArithmeticEnv
    from verigym.eval.config import EvalConfig
    from verigym.eval.run import evaluate
    from verigym.policies.scripted import ScriptedPolicy

    env = ArithmeticEnv()
    policy = ScriptedPolicy(lambda messages: "The answer is 42.", name="instant")
    with tempfile.TemporaryDirectory() as tmp:

        async def go(count: int, seed: int, out: Path) -> float:
            config = EvalConfig(env="arithmetic", num_tasks=count, concurrency=32, max_tokens=64)
            start = time.perf_counter()
            result = await evaluate(env, policy, env.tasks(count, seed=seed), config, out=out)
            assert result.summary["n_scored"] == count, result.summary
            return time.perf_counter() - start

        asyncio.run(go(16, 1, Path(tmp) / "warm"))
        seconds = asyncio.run(go(n, 0, Path(tmp) / "run"))
    return {"seconds": seconds, "units": n}


def rl_worker(rows: int, steps: int) -> dict[str, float]:
    import asyncio

    import torch

    torch.set_num_threads(1)
    from verigym.train import load_model
    from verigym.train.config import build_config
    from verigym.train.rl import RLTrainer

    group = 8
    cfg = build_config(
        {
            "out_dir": tempfile.mkdtemp(prefix="scaling_rl_"),
            "model": {"tiny": "tiny"},
            "envs": [{"name": "arithmetic", "args": {"level": 1}}],
            "sampling": {"temperature": 1.0, "max_tokens": 16},
            "rl": {
                "preset": "dr_grpo",
                "steps": 10**6,
                "groups_per_step": rows // group,
                "group_size": group,
            },
            "logging": {"report": False},
        }
    )
    model, tok = load_model(cfg.model)
    trainer = RLTrainer(cfg, model=model, tokenizer=tok)

    async def step(i: int) -> float:
        t0 = time.perf_counter()
        trainer.consume(await trainer.producer.produce(i))
        return time.perf_counter() - t0

    asyncio.run(step(0))
    times = [asyncio.run(step(i)) for i in range(1, steps + 1)]
    return {"seconds": statistics.median(times), "units": rows}


def measure(kind: str, size: int, steps: int) -> dict[str, float]:
    """Run one size in a fresh subprocess; its result plus its peak RSS (MiB)."""
    cmd = [sys.executable, __file__, "--worker", kind, str(size), "--steps", str(steps)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"worker {kind} {size} failed (exit {proc.returncode})")
    result: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    result["rss_mib"] = usage.ru_maxrss / 1024  # Linux: KiB
    return result


def verdict(name: str, sizes: list[int], rows: dict[int, dict[str, float]]) -> bool:
    """Time: max per-unit cost ÷ the smallest size's ≤ TARGET. Memory: the marginal peak RSS per unit
    of the last interval ÷ that of the first ≤ TARGET (RSS may grow linearly, not faster)."""
    per = {n: rows[n]["seconds"] / rows[n]["units"] * 1e3 for n in sizes}
    print(f"\n{name}: size | ms per unit | marginal ms/unit | peak RSS MiB | marginal RSS KiB/unit")
    slopes: list[float] = []
    for i, n in enumerate(sizes):
        if i == 0:
            print(f"  {n:6d} | {per[n]:11.3f} |                - | {rows[n]['rss_mib']:12.1f} |       -")
            continue
        p = sizes[i - 1]
        dt = (rows[n]["seconds"] - rows[p]["seconds"]) / (rows[n]["units"] - rows[p]["units"]) * 1e3
        slopes.append((rows[n]["rss_mib"] - rows[p]["rss_mib"]) * 1024 / (n - p))
        print(f"  {n:6d} | {per[n]:11.3f} | {dt:16.3f} | {rows[n]['rss_mib']:12.1f} | {slopes[-1]:7.2f}")
    ratio = max(per.values()) / per[sizes[0]]
    spread = max(per.values()) / min(per.values())
    time_ok = ratio <= TARGET
    rss_ratio = slopes[-1] / slopes[0] if slopes and slopes[0] > 0 else 0.0
    rss_ok = rss_ratio <= TARGET
    print(
        f"  time: max per-unit / smallest-size per-unit = {ratio:.2f} (max/min {spread:.2f}); "
        f"target <= {TARGET}: {'MET' if time_ok else 'NOT MET'}"
    )
    print(
        f"  RSS: marginal KiB/unit, last interval / first = {rss_ratio:.2f}; "
        f"target <= {TARGET}: {'MET' if rss_ok else 'NOT MET'}"
    )
    return time_ok and rss_ok


def plot(data: dict[str, tuple[list[int], dict[int, dict[str, float]]]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(data), figsize=(5 * len(data), 7), squeeze=False)
    for col, (name, (sizes, rows)) in enumerate(data.items()):
        per = [rows[n]["seconds"] / rows[n]["units"] * 1e3 for n in sizes]
        axes[0][col].plot(sizes, per, "o-")
        axes[0][col].set_xscale("log")
        axes[0][col].set_ylim(bottom=0)
        axes[0][col].set_title(f"{name}: ms per unit")
        axes[1][col].plot(sizes, [rows[n]["rss_mib"] for n in sizes], "o-", color="tab:orange")
        axes[1][col].set_xscale("log")
        axes[1][col].set_ylim(bottom=0)
        axes[1][col].set_title(f"{name}: peak RSS (MiB)")
        axes[1][col].set_xlabel("tasks" if name == "eval" else "rows per step")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2, help="rounds; every size runs once per round")
    ap.add_argument("--steps", type=int, default=2, help="RL steps timed per run (after one warm-up)")
    ap.add_argument("--eval-sizes", default="50,200,800,3200", help="eval task counts, comma-separated")
    ap.add_argument("--rl-rows", default="64,128,256,512", help="RL rows per step (multiples of 8)")
    ap.add_argument("--png", type=Path, default=HERE / "scaling.png", help="where to write the plot")
    ap.add_argument(
        "--only", choices=("eval", "rl"), help="run one workload (default both; the plot then shows that one)"
    )
    ap.add_argument("--worker", nargs=2, metavar=("KIND", "SIZE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        kind, size = args.worker[0], int(args.worker[1])
        print(json.dumps(eval_worker(size) if kind == "eval" else rl_worker(size, args.steps)))
        return
    plan = {
        "eval": [int(x) for x in args.eval_sizes.split(",")],
        "rl": [int(x) for x in args.rl_rows.split(",")],
    }
    if args.only:
        plan = {args.only: plan[args.only]}
    print(f"load average before: {os.getloadavg()}")
    runs: dict[str, dict[int, list[dict[str, float]]]] = {k: {n: [] for n in v} for k, v in plan.items()}
    for r in range(args.rounds):
        for kind, sizes in plan.items():
            for n in sizes:
                res = measure(kind, n, args.steps)
                runs[kind][n].append(res)
                print(
                    f"round {r} {kind} {n}: {res['seconds']:.3f}s, peak RSS {res['rss_mib']:.1f} MiB",
                    flush=True,
                )
    data: dict[str, tuple[list[int], dict[int, dict[str, float]]]] = {}
    for kind, sizes in plan.items():
        med = {
            n: {
                key: statistics.median(x[key] for x in runs[kind][n])
                for key in ("seconds", "units", "rss_mib")
            }
            for n in sizes
        }
        data[kind] = (sizes, med)
    results = [verdict(kind, sizes, rows) for kind, (sizes, rows) in data.items()]
    print(f"\nload average after: {os.getloadavg()}")
    print(f"overall: {'MET' if all(results) else 'NOT MET'}")
    plot(data, args.png)
    print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
