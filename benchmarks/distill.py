"""Learning from a teacher and from exploration at once: what is the right balance? (issue 26)

On the tiny quickstart task (2-digit addition), per seed: a fresh tiny model → the quickstart's light
SFT → the SFT checkpoint (the student's start) → the quickstart's RL (DAPO, 100 steps of 16 × 8) →
the teacher (the RL-trained checkpoint). Then, from the same SFT weights and with the same seed, each
arm trains for the same steps:

- ``rl``: RL only: the teacher's own run (the same computation; it reaches the teacher at its end);
- ``distill``: distillation only (``reward_coef = 0``, teacher coefficient 1);
- ``rl+opd c``: RL + reverse-KL distillation at coefficients c (default 0.1, 0.3, 1.0);
- ``rl+opd 1→0``: RL + distillation with the coefficient decaying from 1 to 0 (cosine).

Held-out greedy pass@1 (200 test tasks) every 10 steps, against steps and against wall time (the
steps' generation + teacher scoring + update, evals excluded), the policy's entropy, the per-token
reverse KL to the teacher, the gap to the teacher and the first step at which each arm reaches the
teacher's pass@1. Seeds run in ``--jobs`` processes with one torch thread each; each arm's result is
kept under ``--out`` and reused by a rerun (``--fresh`` redoes them).

    nice -n 10 python benchmarks/distill.py --seeds 0-2 --jobs 1
    nice -n 10 python benchmarks/distill.py --env calc --seeds 0-2 --coefs '' --out runs/distill-calc

``--env calc`` repeats it on the tool demo (``quickstart --env calc``'s recipe with the tiny model:
SFT stopped at a low held-out pass@1, DAPO 60 steps of 16 × 8, held-out pass@1 sampled at T = 1 on
150 tasks every 10 steps).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import multiprocessing as mp
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from learning import ci95, machine, parse_seeds

COEFS = (0.1, 0.3, 1.0)


def arms(coefs: tuple[float, ...]) -> dict[str, dict[str, Any] | None]:
    """Arm name → its ``rl.distill`` table (None: RL only). The teacher path is filled in per seed."""
    out: dict[str, dict[str, Any] | None] = {"rl": None, "distill": {"coef": 1.0, "reward_coef": 0.0}}
    for c in coefs:
        out[f"rl+opd {c:g}"] = {"coef": c}
    out["rl+opd 1→0"] = {"coef": 1.0, "schedule": "cosine", "final_coef": 0.0}
    return out


def curve(history: list[dict[str, Any]], start: float) -> dict[str, list[float]]:
    """Per-step series of one run: held-out pass@1 at eval steps (with step 0 = after SFT) and the
    cumulative wall time of the steps (teacher scoring included)."""
    wall = 0.0
    out: dict[str, list[float]] = {"eval_step": [0.0], "eval_pass": [start], "eval_wall": [0.0]}
    for key in ("entropy", "reverse_kl", "teacher_s", "pass_rate"):
        out[key] = []
    for h in history:
        wall += float(h["step_time_s"])
        out["entropy"].append(float(h.get("entropy", math.nan)))
        out["reverse_kl"].append(float(h.get("distill/reverse_kl", math.nan)))
        out["teacher_s"].append(float(h.get("distill/teacher_s", 0.0)))
        out["pass_rate"].append(float(h.get("pass_rate", math.nan)))
        if "eval/pass_at_1" in h:
            out["eval_step"].append(float(h["step"]) + 1)
            out["eval_pass"].append(float(h["eval/pass_at_1"]))
            out["eval_wall"].append(wall)
    out["wall_s"] = [wall]
    return out


def one(job: dict[str, Any]) -> dict[str, Any]:
    """Every arm of one seed (module doc); cached per arm under ``job['out']/seed-N``."""
    import torch

    from verigym.recipes.quickstart import quickstart_config
    from verigym.recipes.quickstart_calc import calc_quickstart_config
    from verigym.train import load_model
    from verigym.train.config import build_config
    from verigym.train.pipeline import build_sft_rows, save_final
    from verigym.train.rl import RLTrainer, load_envs
    from verigym.train.sft import sft_train

    torch.set_num_threads(1)
    seed, steps, env = job["seed"], job["steps"], job["env"]
    out = Path(job["out"]) / (f"seed-{seed}" if env == "arithmetic" else f"{env}-seed-{seed}")
    out.mkdir(parents=True, exist_ok=True)
    over: dict[str, Any] = {"rl__steps": steps} if steps else {}
    if env == "calc":  # the tool quickstart evaluates only at its end; the curves need evals
        cfg = calc_quickstart_config(out / "run", seed=seed, rl__eval_every=10, **over)
    else:
        cfg = quickstart_config(out / "run", seed=seed, **over)
    model, tok = load_model(cfg.model)
    envs = load_envs(cfg)
    sft_file = out / "sft.pt"
    meta_file = out / "sft.json"
    if sft_file.is_file() and meta_file.is_file():
        model.load_state_dict(torch.load(sft_file))
        meta = json.loads(meta_file.read_text())
    else:
        t = RLTrainer(cfg, model=model, tokenizer=tok, envs=envs, out_dir=out / "sft-run")
        rows = build_sft_rows(cfg, tok, envs)
        sft = sft_train(model, tok, rows, cfg.sft, seed=seed, evaluate=lambda: t.evaluate()["eval/pass_at_1"])
        meta = {"sft_steps": sft["steps"], "after_sft": t.evaluate()["eval/pass_at_1"]}
        torch.save(model.state_dict(), sft_file)
        meta_file.write_text(json.dumps(meta))
    sft_weights = copy.deepcopy(model.state_dict())
    arm_dir = out / f"steps-{cfg.rl.steps}"  # the SFT start is shared by every step budget
    arm_dir.mkdir(exist_ok=True)
    teacher_dir = arm_dir / "teacher"
    result: dict[str, Any] = {"seed": seed, **meta, "arms": {}}
    for name, distill in arms(tuple(job["coefs"])).items():
        cache = arm_dir / f"{name.replace(' ', '_').replace('→', 'to')}.json"
        if cache.is_file() and not job["fresh"]:
            result["arms"][name] = json.loads(cache.read_text())
            continue
        model.load_state_dict(sft_weights)
        raw = cfg.model_dump(mode="json")
        raw["out_dir"] = str(arm_dir / "runs" / cache.stem)
        raw["logging"]["report"] = False
        if distill is not None:
            raw["rl"]["distill"] = {**distill, "teacher": str(teacher_dir)}
        arm_cfg = build_config(raw, source=name)
        trainer = RLTrainer(arm_cfg, model=model, tokenizer=tok, envs=envs)
        history = trainer.train()
        if name == "rl":  # the RL-trained checkpoint teaches every other arm
            save_final(model, tok, teacher_dir)
        result["arms"][name] = curve(history, meta["after_sft"])
        cache.write_text(json.dumps(result["arms"][name]))
        print(f"seed {seed} {name}: {result['arms'][name]['eval_pass'][-1]:.3f}", flush=True)
    return result


def reach(arm: dict[str, list[float]], target: float, key: str) -> float:
    """The first eval ``key`` (step or wall) at which pass@1 ≥ target; inf if never."""
    for x, p in zip(arm[key], arm["eval_pass"], strict=True):
        if p >= target - 1e-9:
            return x
    return math.inf


def fmt(values: list[float], digits: int = 3) -> str:
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return "never"
    mean, half = ci95(finite)
    extra = "" if len(finite) == len(values) else f" ({len(values) - len(finite)} never)"
    return (
        f"{mean:.{digits}f} ± {half:.{digits}f}{extra}"
        if math.isfinite(half)
        else f"{mean:.{digits}f}{extra}"
    )


def report(rows: list[dict[str, Any]]) -> list[str]:
    names = list(rows[0]["arms"])
    teacher = [r["arms"]["rl"]["eval_pass"][-1] for r in rows]
    lines = [
        f"after SFT (student start): {fmt([r['after_sft'] for r in rows])}; teacher (RL-trained): {fmt(teacher)}",
        "",
        "| arm | final pass@1 | Δ vs RL only | gap to teacher | mean pass@1 over evals | steps to teacher | "
        "wall s to teacher | wall s total (teacher s) | entropy first → last 10 | reverse KL to teacher first → last 10 |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        arms_ = [r["arms"][name] for r in rows]
        final = [a["eval_pass"][-1] for a in arms_]
        delta = [f - r["arms"]["rl"]["eval_pass"][-1] for f, r in zip(final, rows, strict=True)]
        gap = [t - f for t, f in zip(teacher, final, strict=True)]
        auc = [statistics.fmean(a["eval_pass"][1:]) for a in arms_]
        steps = [reach(a, t, "eval_step") for a, t in zip(arms_, teacher, strict=True)]
        walls = [reach(a, t, "eval_wall") for a, t in zip(arms_, teacher, strict=True)]
        total = [a["wall_s"][0] for a in arms_]
        tsec = [sum(a["teacher_s"]) for a in arms_]
        e0 = [statistics.fmean(a["entropy"][:10]) for a in arms_]
        e1 = [statistics.fmean(a["entropy"][-10:]) for a in arms_]
        k0 = [statistics.fmean(a["reverse_kl"][:10]) for a in arms_]
        k1 = [statistics.fmean(a["reverse_kl"][-10:]) for a in arms_]
        kl = "—" if name == "rl" else f"{fmt(k0)} → {fmt(k1)}"
        lines.append(
            f"| {name} | {fmt(final)} | {'—' if name == 'rl' else fmt(delta)} | {fmt(gap)} | {fmt(auc)} | "
            f"{fmt(steps, 0)} | {fmt(walls, 0)} | {fmt(total, 0)} ({fmt(tsec, 1)}) | {fmt(e0, 3)} → {fmt(e1, 3)} | {kl} |"
        )
    lines.append("")
    lines.append("per seed, final pass@1: " + "; ".join(
        f"{n}: " + "/".join(f"{r['arms'][n]['eval_pass'][-1]:.3f}" for r in rows) for n in names
    ))  # fmt: skip
    return lines


# --env -> the default plot and the task's name in its title
_TASKS: dict[str, tuple[str, str]] = {
    "arithmetic": ("distill.png", "tiny quickstart task"),
    "calc": ("distill_calc.png", "tiny model on the calc tool demo"),
}


def smooth(values: list[float], k: int = 5) -> list[float]:
    """A trailing mean over ``k`` steps (per-step entropy and KL are noisy)."""
    return [statistics.fmean(values[max(0, i - k + 1) : i + 1]) for i in range(len(values))]


def plot(rows: list[dict[str, Any]], path: Path, task: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(rows[0]["arms"])
    fig, axes = plt.subplots(2, 2, figsize=(12, 8.5))
    for name in names:
        arms_ = [r["arms"][name] for r in rows]
        x = arms_[0]["eval_step"]
        mean = [statistics.fmean(a["eval_pass"][i] for a in arms_) for i in range(len(x))]
        (line,) = axes[0][0].plot(x, mean, marker="o", ms=3, label=name)
        wall = [statistics.fmean(a["eval_wall"][i] for a in arms_) for i in range(len(x))]
        axes[0][1].plot(wall, mean, marker="o", ms=3, color=line.get_color(), label=name)
        ent = [statistics.fmean(a["entropy"][i] for a in arms_) for i in range(len(arms_[0]["entropy"]))]
        axes[1][0].plot(range(1, len(ent) + 1), smooth(ent), color=line.get_color(), label=name)
        if name != "rl":
            kl = [
                statistics.fmean(a["reverse_kl"][i] for a in arms_)
                for i in range(len(arms_[0]["reverse_kl"]))
            ]
            axes[1][1].plot(range(1, len(kl) + 1), smooth(kl), color=line.get_color(), label=name)
    teacher = statistics.fmean(r["arms"]["rl"]["eval_pass"][-1] for r in rows)
    for ax in axes[0]:
        ax.axhline(teacher, color="grey", ls="--", lw=1, label="teacher")
        ax.set_ylabel("held-out pass@1 (the recipe's eval, mean over seeds)")
    axes[0][0].set_xlabel("RL step")
    axes[0][1].set_xlabel("wall s of training steps (teacher scoring included)")
    axes[1][0].set_xlabel("RL step")
    axes[1][0].set_ylabel("policy entropy (nats/token, 5-step mean)")
    axes[1][1].set_xlabel("RL step")
    axes[1][1].set_ylabel("per-token reverse KL to the teacher (5-step mean)")
    axes[0][0].legend(fontsize=8)
    seeds = ",".join(str(r["seed"]) for r in rows)
    fig.suptitle(f"On-policy distillation + verified rewards, {task}, seeds {seeds}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0-2", help="seeds: 0-2 or 0,2,5")
    ap.add_argument(
        "--env",
        choices=tuple(_TASKS),
        default="arithmetic",
        help="the quickstart task (arithmetic) or the tool demo (calc: `quickstart --env calc`'s recipe)",
    )
    ap.add_argument("--jobs", type=int, default=1, help="processes (one torch thread each)")
    ap.add_argument(
        "--steps", type=int, default=0, help="RL steps (0: the recipe's: 100 arithmetic, 60 calc)"
    )
    ap.add_argument(
        "--coefs",
        default=",".join(f"{c:g}" for c in COEFS),
        help="RL + distillation coefficients ('' for none: RL only, distillation only and the 1→0 schedule)",
    )
    ap.add_argument("--out", type=Path, default=Path("runs/distill-bench"), help="runs and per-arm results")
    ap.add_argument(
        "--plot", type=Path, default=None, help="PNG (default benchmarks/distill.png, distill_calc.png)"
    )
    ap.add_argument("--fresh", action="store_true", help="redo arms whose results are under --out")
    args = ap.parse_args()
    coefs = [float(c) for c in args.coefs.split(",") if c]
    png, task = _TASKS[args.env]
    plot_path = args.plot or Path(__file__).parent / png
    jobs = [
        {
            "seed": s,
            "env": args.env,
            "steps": args.steps,
            "coefs": coefs,
            "out": str(args.out),
            "fresh": args.fresh,
        }
        for s in parse_seeds(args.seeds)
    ]
    with mp.get_context("spawn").Pool(args.jobs) as pool:
        rows = list(pool.imap(one, jobs))
    (args.out / "results.json").write_text(json.dumps(rows))
    plot(rows, plot_path, task)
    print(machine())
    print(f"env {args.env}, seeds {args.seeds}, RL steps {args.steps or 'the recipe’s'}, plot {plot_path}")
    print("\n".join(report(rows)))


if __name__ == "__main__":
    main()
