"""Structured outputs on the real model (issue 37 item 6): validity with and without the grammar, the
mask's cost per decode step, and what enforcing the schema does to ``json_extract``'s accuracy.

1. **Validity over HTTP.** ``verigym serve MODEL`` in a subprocess, the official ``openai.AsyncOpenAI``
   client, ``--requests`` requests per condition at ``--concurrency`` in flight:
   - ``json_schema``: the prompts of ``json_extract`` (level 1) with ``response_format`` set to each task's
     schema, against the same requests without it: a reply is valid when it parses as JSON (bare, the
     whole reply) and validates against the schema (``jsonschema``);
   - ``tool_choice``: the prompts of ``calc`` with its tools and ``tool_choice="required"``, against the
     same requests with ``tool_choice="auto"``: valid when the reply holds at least one parsed tool call
     and every call names a tool and has arguments valid against that tool's ``parameters``.
   The two sides of a condition alternate by request (same prompts, same seeds).
2. **The mask's cost per decode step**, in-process (``LocalPolicy``, greedy): a pass of B rows under the
   ``json_extract`` schema, timing ``Masks.apply`` (fill each row's bitmask, apply it) and
   ``Masks.accept`` against the pass's whole time per step, at B = 1, 8, 32.
3. **json_extract accuracy** with ``--env-arg response_format=schema`` and without: ``verigym eval
   json_extract`` greedy over ``--eval-n`` tasks for each seed in ``--seeds`` (task draws differ by seed).

    python benchmarks/structured_outputs.py [--model smollm2-135m-instruct] [--requests 200]
        [--concurrency 32] [--threads 2] [--seeds 0 1 2] [--eval-n 40] [--out .bench/structured]

Prints a table per part and MET / NOT MET for the issue's target (validity 100% with the constraint).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import openai

from verigym.envs.registry import load_env
from verigym.serve import spawn_server


def _json_valid(text: str | None, schema: dict[str, Any]) -> bool:
    try:
        jsonschema.validate(json.loads(text or ""), schema)
    except (json.JSONDecodeError, jsonschema.ValidationError):
        return False
    return True


def _calls_valid(message: Any, tools: list[dict[str, Any]]) -> bool:
    params = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    calls = message.tool_calls or []
    if not calls:
        return False
    for call in calls:
        if call.function.name not in params:
            return False
        try:
            jsonschema.validate(json.loads(call.function.arguments), params[call.function.name])
        except (json.JSONDecodeError, jsonschema.ValidationError):
            return False
    return True


async def _validity(
    url: str,
    model: str,
    n: int,
    concurrency: int,
    max_tokens: int,
    sides: list[str] | None = None,
    log: Path | None = None,
) -> dict[str, Any]:
    client = openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0, timeout=3600)
    model = (await client.models.list()).data[0].id  # the name the server serves the model under
    extract = load_env("json_extract", level=1).tasks(n, seed=0)
    calc_env = load_env("calc", verbose=True)
    calc, tools = calc_env.tasks(n, seed=0), calc_env.tool_schemas() or []
    jobs: list[tuple[str, int, dict[str, Any]]] = []
    for i in range(n):  # the two sides of a condition alternate request by request
        messages = [m.to_openai() for m in calc_env.with_system_prompt(list(calc[i].prompt))]
        base = {"model": model, "max_tokens": max_tokens, "temperature": 0.7, "seed": i}
        schema = extract[i].info["schema"]
        ask = [m.to_openai() for m in extract[i].prompt]
        fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
        jobs += [
            ("json_schema on", i, {**base, "messages": ask, "response_format": fmt}),
            ("json_schema off", i, {**base, "messages": ask}),
            (
                "tool_choice=required",
                i,
                {**base, "messages": messages, "tools": tools, "tool_choice": "required"},
            ),
            ("tool_choice=auto", i, {**base, "messages": messages, "tools": tools, "tool_choice": "auto"}),
        ]
    jobs = [job for job in jobs if sides is None or job[0] in sides]
    gate = asyncio.Semaphore(concurrency)
    valid: dict[str, list[bool]] = {}
    finish: dict[str, list[str]] = {}

    errors: dict[str, list[str]] = {}

    async def one(side: str, i: int, body: dict[str, Any]) -> None:
        async with gate:
            try:
                r = await client.chat.completions.create(**body)
            except openai.APIError as exc:  # an error, not an invalid reply: counted apart
                errors.setdefault(side, []).append(f"{type(exc).__name__}: {exc}")
                return
        msg = r.choices[0].message
        ok = (
            _json_valid(msg.content, extract[i].info["schema"])
            if side.startswith("json")
            else _calls_valid(msg, tools)
        )
        valid.setdefault(side, []).append(ok)
        finish.setdefault(side, []).append(r.choices[0].finish_reason)
        if log is not None:  # each reply as it comes: a run stopped early still shows what it measured
            with log.open("a") as f:
                line = {"side": side, "i": i, "valid": ok, "finish": r.choices[0].finish_reason,
                        "tokens": r.usage.completion_tokens if r.usage else None}  # fmt: skip
                f.write(json.dumps(line) + "\n")

    start = time.perf_counter()
    await asyncio.gather(*(one(*job) for job in jobs))
    await client.close()
    return {
        "wall_s": time.perf_counter() - start,
        "rows": {
            side: {
                "n": len(v),
                "valid": sum(v),
                "rate": sum(v) / len(v),
                "cut_at_max_tokens": finish[side].count("length"),
                "errors": len(errors.get(side, [])),
            }
            for side, v in valid.items()
        },
        "first_errors": {side: e[0] for side, e in errors.items()},
    }


def _mask_cost(model: str, threads: int, batches: list[int]) -> list[dict[str, Any]]:
    import torch

    from verigym.policies.local import LocalPolicy, _grammar
    from verigym.types import Sampling

    torch.set_num_threads(threads)
    policy = LocalPolicy.from_pretrained(model, device="cpu")
    tasks = load_env("json_extract", level=1).tasks(max(batches), seed=1)
    spent = {"apply": 0.0, "accept": 0.0, "steps": 0}
    apply, accept = _grammar.Masks.apply, _grammar.Masks.accept

    def timed_apply(self: Any, *a: Any) -> None:
        t = time.perf_counter()
        apply(self, *a)
        spent["apply"] += time.perf_counter() - t
        spent["steps"] += 1

    def timed_accept(self: Any, *a: Any) -> None:
        t = time.perf_counter()
        accept(self, *a)
        spent["accept"] += time.perf_counter() - t

    _grammar.Masks.apply, _grammar.Masks.accept = timed_apply, timed_accept  # type: ignore[method-assign]
    rows = []
    try:
        for b in batches:
            schema = tasks[0].info["schema"]
            fmt = {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}
            sampling = Sampling(temperature=0.0, max_tokens=48, response_format=fmt)
            policy.generate([list(tasks[0].prompt)], sampling)  # compile + warm up
            spent.update(apply=0.0, accept=0.0, steps=0)
            t = time.perf_counter()
            policy.generate([list(t_.prompt) for t_ in tasks[:b]], sampling)
            wall = time.perf_counter() - t
            steps = max(1, int(spent["steps"]))
            mask_ms = (spent["apply"] + spent["accept"]) / steps * 1e3
            rows.append({"batch": b, "steps": steps, "step_ms": wall / steps * 1e3, "mask_ms": mask_ms,
                         "share": mask_ms / (wall / steps * 1e3)})  # fmt: skip
    finally:
        _grammar.Masks.apply, _grammar.Masks.accept = apply, accept  # type: ignore[method-assign]
    return rows


def _eval(model: str, seed: int, n: int, structured: bool, out: Path, threads: int) -> float:
    folder = out / f"eval-{'schema' if structured else 'free'}-{seed}"
    cmd = [sys.executable, "-m", "verigym", "eval", "json_extract", "--model", model, "-n", str(n),
           "--seed", str(seed), "--temperature", "0", "--max-tokens", "256", "--out", str(folder),
           "--env-arg", "level=1", "--threads", str(threads)]  # fmt: skip
    if structured:
        cmd += ["--env-arg", "response_format=schema"]
    if not (folder / "summary.json").exists():
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    summary = json.loads((folder / "summary.json").read_text())
    return float(summary["reward_mean"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="smollm2-135m-instruct", help="catalogue name or model directory")
    ap.add_argument("--requests", type=int, default=200, help="requests per side of each condition")
    ap.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    ap.add_argument("--max-tokens", type=int, default=160, help="max_tokens of each request")
    ap.add_argument("--threads", type=int, default=2, help="torch threads of the server and the evals")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32], help="batch sizes of part 2")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="task seeds of part 3")
    ap.add_argument("--eval-n", type=int, default=40, help="json_extract tasks per seed in part 3")
    ap.add_argument("--parts", default="123", help="which parts to run (e.g. 13)")
    ap.add_argument(
        "--sides",
        nargs="+",
        default=None,
        help="part 1's sides to run (default all: 'json_schema on', 'json_schema off', "
        "'tool_choice=required', 'tool_choice=auto')",
    )
    ap.add_argument("--out", type=Path, default=Path(".bench/structured"), help="where runs and results go")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"model": args.model}
    if "1" in args.parts:
        proc, url = spawn_server(args.model, threads=args.threads)
        try:
            result["validity"] = asyncio.run(
                _validity(
                    url,
                    args.model,
                    args.requests,
                    args.concurrency,
                    args.max_tokens,
                    args.sides,
                    args.out / "replies.jsonl",
                )
            )
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        print(
            f"\n1. validity over HTTP ({args.requests} requests a side, T=0.7, max_tokens {args.max_tokens})"
        )
        for side, row in result["validity"]["rows"].items():
            print(f"  {side:22s} {row['valid']:4d}/{row['n']:<4d} valid = {row['rate']:.3f}  "
                  f"(cut at max_tokens: {row['cut_at_max_tokens']}, errors: {row['errors']})")  # fmt: skip
        met = all(
            result["validity"]["rows"][s]["rate"] == 1.0
            for s in ("json_schema on", "tool_choice=required")
            if s in result["validity"]["rows"]
        )
        print(f"  target: 100% valid with the constraint -> {'MET' if met else 'NOT MET'}")
    if "2" in args.parts:
        result["mask_cost"] = _mask_cost(args.model, args.threads, args.batches)
        print("\n2. the mask's cost per decode step (json_extract schema, greedy)")
        for row in result["mask_cost"]:
            print(f"  batch {row['batch']:3d}: step {row['step_ms']:7.2f} ms, mask {row['mask_ms']:6.3f} ms "
                  f"({100 * row['share']:.1f}% of the step) over {row['steps']} steps")  # fmt: skip
    if "3" in args.parts:
        free = [_eval(args.model, s, args.eval_n, False, args.out, args.threads) for s in args.seeds]
        forced = [_eval(args.model, s, args.eval_n, True, args.out, args.threads) for s in args.seeds]
        lift = [b - a for a, b in zip(free, forced, strict=True)]
        result["json_extract"] = {"free": free, "schema": forced, "lift": lift}
        sd = statistics.stdev(lift) if len(lift) > 1 else 0.0
        print(f"\n3. json_extract level 1, greedy, {args.eval_n} tasks x seeds {args.seeds}: reward")
        print(f"  free   {' '.join(f'{v:.3f}' for v in free)}")
        print(f"  schema {' '.join(f'{v:.3f}' for v in forced)}")
        print(f"  paired lift {statistics.mean(lift):+.3f} +- {sd:.3f} (sd over seeds)")
    (args.out / "result.json").write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
