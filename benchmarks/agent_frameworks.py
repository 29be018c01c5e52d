"""Real agent frameworks, unmodified, against verigym's own ``calc`` harness on a real model (issue 38
item 5): the examples' official ``openai`` SDK loop, the OpenAI Agents SDK (its default Responses model
and its Chat Completions model), LangGraph (``create_react_agent`` on ``langchain-openai``'s ``ChatOpenAI``)
and a command, each run as the harness of ``calc`` through the run's recording gateway, beside the native
``calc`` env, on the same tasks, checkpoint, sampling and seeds (eval's own ``run_rollouts``, k = 1).

Per side and seed: pass@1 (the ``correct`` grader; an errored rollout counts 0 here and is counted
apart), errors, truncated rollouts, model calls, and the token-exact share of calls: a call counts as
exact when its completion is marked token-exact *and* the policy, run again directly on the recorded
prompt ids with the session's seed for that call (the sample's seed + the call's index), samples the
same ids (``--recheck N``: the calls of the first N tasks of every side and seed are re-sampled; the
rest are checked for the mark only). Then each framework's pass@1 minus the native one, paired by seed,
with its spread::

    python benchmarks/agent_frameworks.py --seeds 0-2 -n 20 --temperature 1 --max-tokens 96
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
SIDES: dict[str, dict[str, str]] = {
    "native": {},
    "openai_loop": {"agent": f"{EXAMPLES / 'openai_agent.py'}:agent"},
    "agents_sdk_responses": {"agent": f"{EXAMPLES / 'agents_sdk_agent.py'}:agent"},
    "agents_sdk_chat": {"agent": f"{EXAMPLES / 'agents_sdk_agent.py'}:chat_agent"},
    "langgraph": {"agent": f"{EXAMPLES / 'langgraph_agent.py'}:agent"},
    "command": {"agent_cmd": f"{sys.executable} {EXAMPLES / 'cli_agent.py'}"},
}


def _seeds(text: str) -> list[int]:
    lo, sep, hi = text.partition("-")
    return list(range(int(lo), int(hi) + 1)) if sep else [int(s) for s in text.split(",")]


def _recheck(policy: Any, record: Any) -> tuple[int, int]:
    """(calls re-sampled, calls whose ids the policy sampled again); main-line calls only, in order."""
    traj = record.trajectory
    if traj.state.get("gateway", {}).get("branches", 0):
        return 0, 0
    seed = record.sampling.seed
    same = total = 0
    completions = [t.completion for t in traj.turns if t.completion is not None]
    for index, c in enumerate(completions):
        if not c.prompt_token_ids or c.completion_token_ids is None:
            continue
        spec = policy.spec(list(c.prompt_token_ids), record.sampling, seed=seed + index)
        again = policy.run([spec])[0]
        total += 1
        same += tuple(again.token_ids) == tuple(c.completion_token_ids)
    return total, same


def run_side(
    side: str, policy: Any, tasks: list[Any], sampling: Any, args: argparse.Namespace
) -> dict[str, Any]:
    from verigym.agents import agent_env
    from verigym.envs.registry import load_env
    from verigym.runner import run_rollouts

    base = load_env("calc", verbose=True)
    env = base if side == "native" else agent_env(base, timeout_s=args.agent_timeout, **SIDES[side])  # type: ignore[arg-type]
    start = time.perf_counter()

    async def go() -> list[Any]:
        try:
            return await run_rollouts(
                env, policy, tasks, samples_per_task=1, sampling=sampling,
                concurrency=args.concurrency, env_name="calc", model_name=args.model,
            )  # fmt: skip
        finally:
            close = getattr(env, "close", None)
            if close is not None:
                close()

    records = asyncio.run(go())
    wall = time.perf_counter() - start
    scores = {r.task_id: (0.0 if r.error else float(r.score.grades["correct"].score)) for r in records}
    calls = [c for r in records for c in r.trajectory.completions]
    marked = sum(bool(c.token_ids_exact) for c in calls)
    rechecked = same = 0
    for r in records[: args.recheck]:
        t, s = _recheck(policy, r)
        rechecked, same = rechecked + t, same + s
    errors: dict[str, int] = {}
    for r in records:
        if r.error is not None:
            errors[r.error.kind] = errors.get(r.error.kind, 0) + 1
    first_error = next((r.error.message[:300] for r in records if r.error is not None), None)
    return {
        "side": side,
        "seed": sampling.seed,
        "n": len(records),
        "pass1": statistics.fmean(scores.values()) if scores else 0.0,
        "scores": scores,
        "tool_call_ok": statistics.fmean(
            float(r.score.grades["tool_call_ok"].score) if not r.error else 0.0 for r in records
        ),
        "errors": errors,
        "first_error": first_error,
        "truncated": sum(r.trajectory.stop_reason in ("length", "truncated") for r in records),
        "calls": len(calls),
        "exact_marked": marked,
        "rechecked": rechecked,
        "resampled_same": same,
        "wall_s": round(wall, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smollm2-135m-instruct", help="a catalogue name or model directory")
    ap.add_argument("--seeds", default="0-2", help="sampling seeds: 0-2 or 0,1,2")
    ap.add_argument("-n", type=int, default=20, help="calc tasks (the test split's first n, task seed 0)")
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--sides", default=",".join(SIDES), help=f"comma-separated: {', '.join(SIDES)}")
    ap.add_argument("--concurrency", type=int, default=4, help="rollouts at a time (rows batched)")
    ap.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    ap.add_argument(
        "--recheck", type=int, default=5, help="tasks per side and seed whose calls are re-sampled"
    )
    ap.add_argument("--agent-timeout", type=float, default=600.0)
    ap.add_argument("--json", type=Path, default=None, help="write every row here")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    from verigym.envs.registry import load_env
    from verigym.policies.local import LocalPolicy
    from verigym.types import Sampling

    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    if unknown := [s for s in sides if s not in SIDES]:
        ap.error(f"--sides: unknown {unknown}")
    policy = LocalPolicy.from_pretrained(args.model, device="cpu")
    tasks = load_env("calc", verbose=True).tasks(args.n, seed=0)
    rows: list[dict[str, Any]] = []
    print(f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, {args}", flush=True)
    for seed in _seeds(args.seeds):
        sampling = Sampling(temperature=args.temperature, max_tokens=args.max_tokens, seed=seed)
        for side in sides:
            row = run_side(side, policy, tasks, sampling, args)
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "scores"}), flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))
    _table(rows, sides)


def _table(rows: list[dict[str, Any]], sides: list[str]) -> None:
    by = {(r["side"], r["seed"]): r for r in rows}
    seeds = sorted({r["seed"] for r in rows})
    print("\n| harness | pass@1 per seed | mean | Δ vs native per seed | Δ mean ± sd (seeds) | paired Δ over tasks [95% CI] "
          "| tool_call_ok | errors | truncated | calls | token-exact (marked) | re-sampled same |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for side in sides:
        mine = [by[(side, s)] for s in seeds if (side, s) in by]
        p1 = [r["pass1"] for r in mine]
        deltas: list[float] = []
        pairs: list[float] = []
        if side != "native":
            for r in mine:
                native = by.get(("native", r["seed"]))
                if native is not None:
                    deltas.append(r["pass1"] - native["pass1"])
                    pairs += [
                        r["scores"][t] - native["scores"][t] for t in r["scores"] if t in native["scores"]
                    ]
        if pairs:
            m = statistics.fmean(pairs)
            half = 1.96 * (statistics.stdev(pairs) / len(pairs) ** 0.5 if len(pairs) > 1 else 0.0)
            ci = f"{m:+.3f} [{m - half:+.3f}, {m + half:+.3f}] (n={len(pairs)})"
        else:
            ci = "—"
        d = (
            f"{statistics.fmean(deltas):+.3f} ± {statistics.stdev(deltas) if len(deltas) > 1 else 0.0:.3f}"
            if deltas
            else "—"
        )
        errors: dict[str, int] = {}
        for r in mine:
            for k, v in r["errors"].items():
                errors[k] = errors.get(k, 0) + v
        calls = sum(r["calls"] for r in mine)
        print(
            f"| {side} | {', '.join(f'{x:.2f}' for x in p1)} | {statistics.fmean(p1):.3f} "
            f"| {', '.join(f'{x:+.2f}' for x in deltas) or '—'} | {d} | {ci} "
            f"| {statistics.fmean(r['tool_call_ok'] for r in mine):.3f} "
            f"| {sum(errors.values())}{' ' + json.dumps(errors) if errors else ''} "
            f"| {sum(r['truncated'] for r in mine)} | {calls} "
            f"| {sum(r['exact_marked'] for r in mine)}/{calls} "
            f"| {sum(r['resampled_same'] for r in mine)}/{sum(r['rechecked'] for r in mine)} |"
        )


if __name__ == "__main__":
    main()
