"""verigym's RL step against TRL's ``GRPOTrainer`` on a real pretrained model (issue 24 item 4).

``rl_vs_trl.py`` does the same on the tiny model; this one runs the real-model quickstart recipe.

Same model, same SFT checkpoint, same task and settings, sides alternating seed by seed:

1. per seed, verigym's SFT of the real-model quickstart recipe (``quickstart_real``) runs once and is
   saved as a Hugging Face directory; both sides start from it;
2. verigym's RL (``RLTrainer``, the recipe's DAPO settings less what TRL lacks: dynamic sampling and
   the soft overlong penalty are off, so both sides optimise the same loss on the same batch shape)
   and TRL's ``GRPOTrainer`` (``loss_type dapo``, clip 0.2/0.28, no KL, group-scaled rewards,
   constant lr, the same groups × samples per step, temperature and completion cap) each run
   ``--steps`` steps in their own process with the same torch threads; the reward on both sides
   is verigym's arithmetic check;
3. both trained models are evaluated by the same held-out eval, the recipe's ``eval``: pass@1 sampled at
   T = 1, 100 test tasks × 4 samples, seeded alike on both sides.

It prints seconds per step (each step timed from its start to its end, on both sides), the ratio,
held-out pass@1 after each side with the paired difference and its 95% t-interval, where a verigym
step's time goes (generation with grading, update, bookkeeping), peak RSS per side, and MET/NOT MET
against the issue's targets (≥ 1.5× faster in every pair; mean pass@1 not below TRL's beyond the
seeds' noise). Needs TRL in the peer venv (``make bench-venv``).

    python benchmarks/rl_vs_trl_real.py --seeds 0-2 --steps 20
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from learning import ci95, machine, parse_seeds, verdict

ROOT = Path(__file__).resolve().parents[1]
PEER = ROOT / ".bench" / "venv" / "bin" / "python"


def recipe(out: Path, model: str, seed: int, sets: dict[str, Any]) -> Any:
    from verigym.recipes.quickstart_real import real_quickstart_config

    return real_quickstart_config(out, model=model, seed=seed, **sets)


def sft_checkpoint(job: dict[str, Any]) -> dict[str, Any]:
    """The recipe's SFT for one seed, saved as a model directory (reused when it exists)."""
    done = Path(job["work"]) / f"sft-{job['seed']}" / "sft.json"
    if done.is_file():
        return dict(json.loads(done.read_text()))
    from verigym.train import load_model
    from verigym.train.pipeline import build_sft_rows, save_final
    from verigym.train.rl import RLTrainer, load_envs
    from verigym.train.sft import sft_train

    cfg = recipe(done.parent / "run", job["model"], job["seed"], job["sets"])
    model, tok = load_model(cfg.model)
    cached = Path(job["sft_from"] or ".") / f"sft-{job['seed']}.pt"
    if job["sft_from"] and cached.is_file():  # the same recipe's SFT weights, saved by learning.py
        import torch

        model.load_state_dict(torch.load(cached))
        steps = json.loads(cached.with_suffix(".json").read_text())["sft_steps"]
    else:
        trainer = RLTrainer(cfg, model=model, tokenizer=tok, envs=load_envs(cfg), out_dir=done.parent / "run")
        rows = build_sft_rows(cfg, tok, trainer.envs)
        evaluate = lambda: trainer.evaluate()["eval/pass_at_1"]  # noqa: E731
        steps = sft_train(model, tok, rows, cfg.sft, seed=cfg.seed, evaluate=evaluate)["steps"]
    save_final(model, tok, done.parent / "model")
    info = {"sft_steps": steps, "dir": str(done.parent / "model")}
    done.write_text(json.dumps(info))
    return info


def verigym_side(job: dict[str, Any]) -> None:
    """RL from the SFT directory; writes ``result.json`` and the trained model (run in a subprocess)."""
    import torch

    torch.set_num_threads(job["threads"])
    from verigym.train import load_model
    from verigym.train.pipeline import save_final
    from verigym.train.rl import RLTrainer, load_envs

    out = Path(job["out"])
    cfg = recipe(out / "run", job["sft_dir"], job["seed"], {**job["sets"], "sft__demos": 0})
    model, tok = load_model(cfg.model)
    stamps: list[float] = []
    trainer = RLTrainer(
        cfg,
        model=model,
        tokenizer=tok,
        envs=load_envs(cfg),
        out_dir=out / "run",
        progress=lambda event, info: stamps.append(time.perf_counter()) if event == "step" else None,
    )
    t0 = time.perf_counter()
    history = trainer.train()
    ends = [t0, *stamps]
    save_final(model, tok, out / "model")
    gen = [h.get("gen_time_s", 0.0) for h in history]
    upd = [h.get("update_time_s", 0.0) for h in history]
    result = {
        "step_times": [b - a for a, b in itertools.pairwise(ends)],
        "gen_s": statistics.fmean(gen),
        "update_s": statistics.fmean(upd),
        "train_reward": [h.get("reward", float("nan")) for h in history],
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    }
    (out / "result.json").write_text(json.dumps(result))


def trl_job(job: dict[str, Any]) -> dict[str, Any]:
    """What the TRL side needs: the SFT directory, the same train prompts and references, settings."""
    from verigym.train.rl import load_envs

    cfg = recipe(Path(job["out"]) / "run", job["sft_dir"], job["seed"], job["sets"])
    (_, env), *_ = load_envs(cfg)
    tasks = env.tasks(None, seed=cfg.seed, split="train")
    rl = cfg.rl
    return {
        **job,
        "model": job["sft_dir"],
        "prompts": [[{"role": m.role, "content": m.content} for m in t.prompt] for t in tasks],
        "answers": [t.answer for t in tasks],
        "max_tokens": cfg.sampling.max_tokens,
        "temperature": cfg.sampling.temperature,
        "rl": {
            "steps": rl.steps,
            "lr": rl.lr,
            "max_grad_norm": rl.max_grad_norm,
            "groups_per_step": rl.groups_per_step,
            "group_size": rl.group_size,
            "eps_low": rl.eps_low,
            "eps_high": rl.eps_high,
        },
    }


def _job_key(job: dict[str, Any]) -> dict[str, Any]:
    """What makes two sides' runs the same job: not where they are kept (``--work`` relative or
    absolute) nor ``--fresh``."""
    return {k: v for k, v in job.items() if k not in ("fresh", "work", "out")}


def run_side(side: str, job: dict[str, Any]) -> dict[str, Any]:
    """One side's RL run in its own process; a finished side with the same job is reused (``--fresh``
    redoes it), so seeds can run in separate invocations and an interrupted run loses one side at most."""
    out = Path(job["out"])
    out.mkdir(parents=True, exist_ok=True)
    done = out / "side.json"
    if not job["fresh"] and done.is_file():
        kept = json.loads(done.read_text())
        if _job_key(kept["job"]) == _job_key(job):
            return dict(kept["result"])
    spec = out / "job.json"
    if side == "trl":
        spec.write_text(json.dumps(trl_job(job)))
        cmd = [str(PEER), str(ROOT / "benchmarks" / "_trl_grpo_side.py"), str(spec)]
    else:
        spec.write_text(json.dumps(job))
        cmd = [sys.executable, __file__, "--side", str(spec)]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": str(job["threads"])}
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=env)
    result = dict(json.loads((out / "result.json").read_text()))
    result["process_s"] = time.perf_counter() - t0
    result["s_per_step"] = statistics.fmean(result["step_times"])
    result["after"] = held_out(str(out / "model"), job)
    done.write_text(json.dumps({"job": _job_key(job), "result": result}))
    return result


def held_out(model_dir: str, job: dict[str, Any]) -> float:
    """The recipe's held-out eval (pass@1 at T = 1 on the test split under the seed) on a saved model."""
    from verigym.train import load_model
    from verigym.train.rl import RLTrainer, load_envs

    cfg = recipe(Path(job["work"]) / "eval", model_dir, job["seed"], job["sets"])
    model, tok = load_model(cfg.model)
    trainer = RLTrainer(
        cfg, model=model, tokenizer=tok, envs=load_envs(cfg), out_dir=Path(job["work"]) / "eval"
    )
    return float(trainer.evaluate()["eval/pass_at_1"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0-2", help="seeds: 0-2 or 0,2,5")
    ap.add_argument("--model", default="smollm2-135m-instruct", help="catalogue name or model directory")
    ap.add_argument("--steps", type=int, default=20, help="RL steps per side")
    ap.add_argument("--threads", type=int, default=1, help="torch threads on each side")
    ap.add_argument(
        "--work", type=Path, default=ROOT / ".bench" / "rl_vs_trl_real", help="SFT checkpoints and runs"
    )
    ap.add_argument(
        "--set", action="append", default=[], help="recipe override KEY=VALUE, dotted with __ (rl__lr=3e-6)"
    )
    ap.add_argument(
        "--sft-from",
        type=Path,
        default=None,
        help="a folder of sft-SEED.pt/.json: the recipe's SFT weights as benchmarks/learning.py --keep-sft saves them",
    )
    ap.add_argument("--fresh", action="store_true", help="redo sides already finished under --work")
    ap.add_argument("--side", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.side is not None:
        verigym_side(json.loads(args.side.read_text()))
        return
    if not PEER.is_file():
        sys.exit(f"no peer venv at {PEER}: run `make bench-venv` (installs trl)")
    import torch

    torch.set_num_threads(args.threads)
    sets = {k: json.loads(v) for k, _, v in (s.partition("=") for s in args.set)}
    sets.update({"rl__steps": args.steps, "rl__dynamic_sampling": False, "rl__overlong_buffer": 0})
    print(machine(), f"· steps {args.steps} · threads {args.threads} · sets {sets}")
    rows = []
    for seed in parse_seeds(args.seeds):
        base = {
            "seed": seed,
            "model": args.model,
            "sets": sets,
            "threads": args.threads,
            "work": str(args.work),
            "sft_from": str(args.sft_from or ""),
            "fresh": args.fresh,
        }
        sft = sft_checkpoint(base)
        row: dict[str, Any] = {
            "seed": seed,
            "sft_steps": sft["sft_steps"],
            "after_sft": held_out(sft["dir"], base),
        }
        for side in ("verigym", "trl") if seed % 2 == 0 else ("trl", "verigym"):
            job = {**base, "sft_dir": sft["dir"], "out": str(args.work / f"{side}-{seed}")}
            row[side] = run_side(side, job)
            print(
                f"seed {seed} {side}: {row[side]['s_per_step']:.2f} s/step, pass@1 after {row[side]['after']:.3f}"
            )
        rows.append(row)
    report(rows)


def report(rows: list[dict[str, Any]]) -> None:
    print(
        "| seed | after SFT | verigym s/step | TRL s/step | speed-up | pass@1 verigym | pass@1 TRL | peak RSS GB v / T |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        v, t = r["verigym"], r["trl"]
        print(
            f"| {r['seed']} | {r['after_sft']:.3f} | {v['s_per_step']:.2f} | {t['s_per_step']:.2f} | "
            f"{t['s_per_step'] / v['s_per_step']:.2f}× | {v['after']:.3f} | {t['after']:.3f} | "
            f"{v['peak_rss_gb']:.2f} / {t['peak_rss_gb']:.2f} |"
        )
    ratios = [r["trl"]["s_per_step"] / r["verigym"]["s_per_step"] for r in rows]
    diff, half = ci95([r["verigym"]["after"] - r["trl"]["after"] for r in rows])
    for r in rows:
        v = r["verigym"]
        rest = v["s_per_step"] - v["gen_s"] - v["update_s"]
        print(
            f"seed {r['seed']} verigym step: generation + grading {v['gen_s']:.2f} s, "
            f"update {v['update_s']:.2f} s, bookkeeping {rest:.2f} s"
        )
    print(f"≥ 1.5× faster per step in every pair: {verdict(min(ratios) >= 1.5)} (min {min(ratios):.2f}×)")
    print(
        f"pass@1 after, verigym − TRL: {diff:+.3f} ± {half:.3f} (95% CI, n={len(rows)}); "
        f"not below TRL beyond the noise: {verdict(diff + (half if half == half else 0.0) >= 0)}"
    )


if __name__ == "__main__":
    main()
