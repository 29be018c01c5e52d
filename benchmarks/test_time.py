"""Test-time selection at equal token budgets: majority, DeepConf (offline low/high, online),
GenSelect and best-of-N, at N = 1, 4, 16, 64, on the quickstart checkpoint and ``arithmetic``.

What it does, in one run on the same samples:

1. the model: ``runs/quickstart/checkpoint`` when it exists; otherwise a tiny model SFT'd on
   arithmetic oracle demonstrations by this script (``--prepare``, cached in ``.bench/test_time``;
   its recipe is written to ``provenance.json`` and printed);
2. samples ``max(N)`` traces per task once (top-20 logprobs), through ``verigym.select``'s
   experiment (the runner), and measures every method at every N on sub-samples of that pool;
3. runs DeepConf-online LIVE inside ``LocalPolicy.generate`` (the early-stop hook) on the same
   seeds for a few tasks and checks that its token count equals the replayed one;
4. cross-checks token/group confidences against an independent numpy implementation of the
   DeepConf formulas (the paper's reference code has no package to install; no peer library
   implements these selectors, so the baseline every ratio is taken against is majority vote).

Prints accuracy, tokens/task, the token ratio to majority@N and verdicts at equal tokens; writes
``summary.json`` and ``report.html`` to ``--out``.

    python benchmarks/test_time.py --level 1 --tasks 50 --ns 1,4,16,64          # quickstart checkpoint
    python benchmarks/test_time.py --cot --level 1 --digits 1 --terms 3 --tasks 50  # longer traces
    python benchmarks/test_time.py --env math --tasks 20 --max-tokens 32 --methods majority,deepconf,deepconf-online

``--cot`` uses a tiny model SFT'd here (``--prepare``/``prepare_cot_model``) to write running sums
(``3+5+7=`` → ``8+7=15``): traces of ~7 tokens instead of ~3, where confidence has room to vary.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

QUICKSTART = Path("runs/quickstart/checkpoint")
CACHE = Path(".bench/test_time/model")
COT_CACHE = Path(".bench/test_time/model_cot")


def env_kwargs(level: int, digits: int | None, terms: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"level": level}
    if digits is not None:
        out["digits"] = digits
    if terms is not None:
        out["terms"] = terms
    return out


def prepare_model(steps: int, level: int, digits: int | None, init: str | None, threads: int) -> Path:
    """SFT a tiny model on verified arithmetic oracle demos; save it to ``CACHE`` with its recipe."""
    import torch

    from verigym.envs.registry import load_env
    from verigym.policies import tiny
    from verigym.train.config import SFTConfig
    from verigym.train.sft import messages_row, oracle_demos, sft_train

    torch.set_num_threads(threads)
    env = load_env("arithmetic", **env_kwargs(level, digits))
    if init:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tok = AutoTokenizer.from_pretrained(init)
        model = AutoModelForCausalLM.from_pretrained(init)
    else:
        tok = tiny.build_tokenizer()
        model = tiny.build_model("tiny", tok, seed=0)
    demos = asyncio.run(oracle_demos(env, 4000, seed=level, env_name="arithmetic"))
    rows = [messages_row(tok, m) for m in demos]
    cfg = SFTConfig(max_steps=steps, batch_size=32, lr=2e-3, lr_schedule="constant")
    t0 = time.perf_counter()
    result = sft_train(model, tok, rows, cfg, seed=level)
    CACHE.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(CACHE)
    tok.save_pretrained(CACHE)
    history = []
    old = CACHE / "provenance.json"
    if old.exists():
        history = json.loads(old.read_text()).get("stages", [])
    stage = {
        "init": init or "fresh tiny (seed 0)",
        "demos": len(rows),
        "level": level,
        "digits": digits,
        "steps": result["steps"],
        "batch_size": 32,
        "lr": 2e-3,
        "wall_s": time.perf_counter() - t0,
    }
    (CACHE / "provenance.json").write_text(json.dumps({"stages": [*history, stage]}, indent=2))
    return CACHE


def cot_reply(expression: str) -> str:
    """A worked answer for ``a+b+c=``: running sums, e.g. ``3+5+7=`` → ``8+7=15``."""
    import re

    nums = [int(x) for x in re.findall(r"\d+", expression)]
    total, steps = nums[0] + nums[1], []
    for value in nums[2:]:
        steps.append(f"{total}+{value}=")
        total += value
    return "".join(steps) + str(total)


def prepare_cot_model(steps: int, init: str, threads: int) -> Path:
    """SFT ``init`` to write running sums for 3-term one-digit additions (longer, checkable traces)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from verigym.envs.registry import load_env
    from verigym.train.config import SFTConfig
    from verigym.train.sft import messages_row, sft_train
    from verigym.types import Message

    torch.set_num_threads(threads)
    env = load_env("arithmetic", level=1, digits=1, terms=3)
    tok = AutoTokenizer.from_pretrained(init)
    model = AutoModelForCausalLM.from_pretrained(init)
    rows = []
    for task in env.tasks(4000, seed=7, split="train"):
        prompt = task.prompt[-1].content
        rows.append(messages_row(tok, [*task.prompt, Message(role="assistant", content=cot_reply(prompt))]))
    result = sft_train(
        model, tok, rows, SFTConfig(max_steps=steps, batch_size=32, lr=2e-3, lr_schedule="constant"), seed=7
    )
    out = COT_CACHE
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    (out / "provenance.json").write_text(
        json.dumps(
            {"init": init, "steps": result["steps"], "demos": len(rows), "format": "running sums"}, indent=2
        )
    )
    return out


def numpy_reference(top_logprobs: list[tuple[float, ...]], k: int, window: int) -> tuple[np.ndarray, float]:
    """DeepConf's formulas written independently: C = −mean(top-k), lowest sliding-window mean."""
    arr = np.array([list(r[:k]) for r in top_logprobs], dtype=np.float64)
    conf = -arr.mean(axis=1)
    if len(conf) < window:
        return conf, float(conf.mean())
    means = np.convolve(conf, np.ones(window) / window, mode="valid")
    return conf, float(means.min())


def cross_check(pools: list[Any], k: int, fraction: float) -> float:
    from verigym.select._confidence import choose_window, token_confidences, trace_score

    worst = 0.0
    for pool in pools[:20]:
        tops = [c.top_logprobs for c in pool.candidates if c.top_logprobs]
        w = choose_window([len(t) for t in tops], 2048, fraction)
        for t in tops:
            ref_c, ref_low = numpy_reference(list(t), k, w)
            ours = token_confidences(t, k)
            worst = max(worst, float(np.abs(np.array(ours) - ref_c).max()))
            worst = max(worst, abs((trace_score(ours, w, "lowest") or 0.0) - ref_low))
    return worst


async def live_online(
    policy: Any, env: Any, tasks: list[Any], pools: list[Any], cfg: Any, n: int
) -> dict[str, Any]:
    """DeepConf-online inside LocalPolicy.generate on the pool's own seeds; compares with the replay."""
    from verigym.runner import sample_seed
    from verigym.select._common import answer_key
    from verigym.select.deepconf import select_online
    from verigym.select.majority import select_majority
    from verigym.select.online_run import run_online
    from verigym.select.run import default_warmup
    from verigym.types import Sampling

    sampling = Sampling(temperature=cfg["temperature"], max_tokens=cfg["max_tokens"], seed=cfg["seed"])
    warm = default_warmup(n)
    live_tokens = replay_tokens = full_tokens = 0
    live_correct = majority_correct = 0
    t0 = time.perf_counter()
    for task, pool in zip(tasks, pools, strict=True):
        seeds = [sample_seed(cfg["seed"], task.id, i) or 0 for i in range(n)]
        run = await run_online(
            policy, list(task.prompt), n=n, sampling=sampling, answer=lambda t: answer_key(env, t),
            warmup=warm, eta=cfg["eta"], fraction=cfg["fraction"], k=cfg["k"], seeds=seeds,
        )  # fmt: skip
        cands = pool.candidates[:n]
        replay = select_online(cands, warmup=warm, eta=cfg["eta"], fraction=cfg["fraction"], k=cfg["k"])
        live_tokens += run.tokens_used
        replay_tokens += int(replay.detail["tokens_used"])
        full_tokens += sum(c.tokens for c in cands)
        pick = run.selection.index
        live_correct += bool(pick is not None and cands[pick].correct)
        maj = select_majority(cands).index
        majority_correct += bool(maj is not None and cands[maj].correct)
    return {
        "tasks": len(tasks),
        "n": n,
        "live_tokens": live_tokens,
        "replay_tokens": replay_tokens,
        "full_tokens": full_tokens,
        "live_equals_replay": live_tokens == replay_tokens,
        "live_accuracy": live_correct / max(len(tasks), 1),
        "majority_accuracy": majority_correct / max(len(tasks), 1),
        "wall_s": time.perf_counter() - t0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--env", default="arithmetic")
    ap.add_argument("--level", type=int, default=1, help="arithmetic difficulty level")
    ap.add_argument(
        "--digits", type=int, default=None, help="arithmetic operand digits (overrides the level's)"
    )
    ap.add_argument("--tasks", type=int, default=50)
    ap.add_argument("--ns", default="1,4,16,64")
    ap.add_argument("--methods", default="majority,deepconf,deepconf-online,genselect,best-of-n")
    ap.add_argument(
        "--model", default=None, help="model dir [default: quickstart checkpoint, else the cache]"
    )
    ap.add_argument("--prepare", type=int, default=0, help="SFT steps to (re)build the cached model first")
    ap.add_argument("--prepare-level", type=int, default=1)
    ap.add_argument("--init", default=None, help="continue --prepare from this model dir")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--cot", action="store_true", help="use the running-sums model (3-term sums, longer traces)"
    )
    ap.add_argument("--terms", type=int, default=None, help="arithmetic operands per task")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--live-tasks", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=".bench/test_time/run")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    if args.prepare:
        prepare_model(args.prepare, args.prepare_level, args.digits, args.init, args.threads)
    if args.model:
        model_dir, origin = Path(args.model), "given with --model"
    elif args.cot:
        model_dir, origin = COT_CACHE, f"running-sums model SFT'd here: {_provenance(COT_CACHE)}"
    elif QUICKSTART.exists():
        model_dir, origin = QUICKSTART, "quickstart checkpoint"
    elif CACHE.exists():
        prov = (
            json.loads((CACHE / "provenance.json").read_text())
            if (CACHE / "provenance.json").exists()
            else {}
        )
        model_dir, origin = (
            CACHE,
            f"runs/quickstart/checkpoint does not exist; used a tiny model SFT'd here: {prov}",
        )
    else:
        raise SystemExit("no model: runs/quickstart/checkpoint is missing; run with --prepare 600 first")
    print(f"model: {model_dir} ({origin})")

    from verigym.envs.registry import load_env
    from verigym.policies.local import LocalPolicy
    from verigym.select._summary import write_report, write_summary
    from verigym.select.experiment import run_experiment
    from verigym.select.run import SelectConfig, measure
    from verigym.types import Sampling

    env_args = env_kwargs(args.level, args.digits, args.terms) if args.env == "arithmetic" else {}
    env = load_env(args.env, **env_args)
    tasks = env.tasks(args.tasks, seed=args.seed)
    policy = LocalPolicy.from_pretrained(model_dir, device="cpu")
    ns = [int(x) for x in args.ns.split(",")]
    cfg = SelectConfig(methods=args.methods.split(","), ns=ns, seed=args.seed,
                       judge_sampling=Sampling(temperature=0.0, max_tokens=16, seed=args.seed))  # fmt: skip
    out = Path(args.out)
    t0 = time.perf_counter()
    res = asyncio.run(
        run_experiment(
            env, policy, tasks, cfg, sampling=Sampling(temperature=args.temperature, max_tokens=args.max_tokens, seed=args.seed),
            concurrency=4096, judge=policy, out=out, env_name=f"{args.env} {env_args}", model_name=str(model_dir),
            extra_meta={"model_origin": origin},
        )
    )  # fmt: skip
    summary = res.summary
    variants = {
        "deepconf-high (eta=0.9)": SelectConfig(methods=["deepconf"], ns=ns, seed=args.seed, eta=0.9),
        "deepconf-tail (eta=0.1)": SelectConfig(methods=["deepconf"], ns=ns, seed=args.seed, score="tail"),
        "deepconf-bottom10 (eta=0.1)": SelectConfig(
            methods=["deepconf"], ns=ns, seed=args.seed, score="bottom10"
        ),
    }
    if "deepconf" in cfg.methods:
        for label, variant in variants.items():
            rows = asyncio.run(measure(res.pools, variant))["deepconf"]
            summary["methods"][label] = [p.as_dict() for p in rows]
    summary["confidence_max_abs_diff_vs_numpy"] = cross_check(res.pools, cfg.k, cfg.fraction)
    live_n = max(ns)
    summary["live_online"] = asyncio.run(
        live_online(policy, env, tasks[: args.live_tasks], res.pools[: args.live_tasks],
                    {"temperature": args.temperature, "max_tokens": args.max_tokens, "seed": args.seed,
                     "eta": cfg.eta, "fraction": cfg.fraction, "k": cfg.k}, live_n)
    )  # fmt: skip
    summary["wall_s"] = time.perf_counter() - t0
    write_summary(out, summary)
    write_report(out, summary)
    _print(summary)


def _provenance(path: Path) -> str:
    file = path / "provenance.json"
    return file.read_text().replace("\n", " ") if file.exists() else "(no provenance.json)"


def _print(summary: dict[str, Any]) -> None:
    maj = {r["n"]: r for r in summary["methods"].get("majority", [])}
    print(f"\n{summary['env']}: {summary['tasks']} tasks, {summary['samples']} samples/task (sampled once)")
    print(
        f"{'method':26s} {'N':>3s} {'acc':>6s} {'tok/task':>9s} {'tok/maj@N':>9s} {'acc-maj@N':>9s} fallbacks"
    )
    for method, rows in summary["methods"].items():
        for r in rows:
            m = maj.get(r["n"])
            ratio = (
                r["tokens_per_task"] / m["tokens_per_task"] if m and m["tokens_per_task"] else float("nan")
            )
            delta = r["accuracy"] - m["accuracy"] if m else float("nan")
            print(
                f"{method:26s} {r['n']:3d} {r['accuracy']:6.3f} {r['tokens_per_task']:9.1f} {ratio:9.3f} {delta:+9.3f} {r['fallbacks']}"
            )
    print("pass@N (oracle):", {o["n"]: round(o["pass_at_n"], 3) for o in summary["oracle_pass_at_n"]})
    print("\nagainst majority at equal tokens:")
    for c in summary["vs_majority_at_equal_tokens"]:
        print(f"  {c['method']:16s} N={c['n']:<3d} {c['verdict']}")
    print("\nDeepConf-online vs majority@N:")
    for o in summary["deepconf_online_vs_majority"]:
        print(f"  N={o['n']:<3d} acc {o['online_accuracy']:.3f} vs {o['majority_accuracy']:.3f}, "
              f"{o['tokens_saved_pct']:.1f}% fewer tokens, reaches majority with fewer tokens: "
              f"{o['reaches_majority_with_fewer_tokens']}")  # fmt: skip
    print("live DeepConf-online in LocalPolicy.generate:", summary["live_online"])
    print("confidence max |diff| vs numpy reference:", summary["confidence_max_abs_diff_vs_numpy"])


if __name__ == "__main__":
    main()
