"""Self-distillation on the real model: does RL + distillation reach the teacher sooner than RL alone?
(issue 26 item 4)

The runs come from ``benchmarks/learning.py`` on SmolLM2-135M-Instruct's ``calc`` recipe
(``real_calc_config``), from the same kept SFT weights per seed (``--keep-sft DIR``):

- RL only: ``learning.py --model smollm2-135m-instruct --env calc --seeds S --keep-sft DIR --runs R``;
- the teacher: seed 0's RL-only run folder (``R/quickstart-0/rl``, its final checkpoint);
- RL + distillation: the same with ``--no-control --set rl__preset=opd --set
  rl__distill__teacher=R/quickstart-0/rl`` (DAPO plus the per-token reverse KL to the teacher,
  coefficient 1 decaying to 0 by cosine; Agarwal et al. 2024, "On-Policy Distillation of Language
  Models"; Lu & Thinking Machines 2025, "On-Policy Distillation").

This script reads each run's ``metrics.jsonl`` (one folder per seed and arm) and prints, per seed and
arm, the batch pass rate per step (the policy's own samples at T = 1 on training tasks, the same
temperature as the held-out eval), the first step at which it reaches ``--target`` values (the
teacher's held-out pass@1, and lower marks), the seconds a step spent in generation, teacher scoring
and the update, and the held-out pass@1 after training when given (``--after``, from learning.py's
output). Wall times of runs made on a shared machine under different loads are not comparable, so
"sooner in wall time" is given as steps × each arm's own per-step cost split (the teacher's share).

    python benchmarks/distill_real.py --teacher 0.91 \\
        --arm rl=/tmp/calc4/rl-0,RUN1,RUN2 --arm opd=/tmp/opd/runs-0/quickstart-0/rl,... \\
        --after rl=0.91,0.93,0.92 --after opd=0.98,... [--plot PNG]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from learning import ci95


def read_run(folder: Path) -> list[dict[str, Any]]:
    """The RL steps of one run (rows of ``metrics.jsonl`` with a batch pass rate), by step; ``folder``
    is a run folder or its ``metrics.jsonl`` itself."""
    path = folder / "metrics.jsonl" if folder.is_dir() else folder
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return sorted((r for r in rows if "pass_rate" in r), key=lambda r: int(r["step"]))


def first_step(curve: list[float], target: float) -> int | None:
    """1-based step at which the batch pass rate first reaches ``target`` (None: never)."""
    return next((i + 1 for i, v in enumerate(curve) if v >= target), None)


def step_cost(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Mean seconds a step in generation, teacher scoring and the update, and the teacher's share."""
    gen = statistics.fmean(float(r.get("gen_time_s", 0.0)) for r in rows)
    upd = statistics.fmean(float(r.get("update_time_s", 0.0)) for r in rows)
    teacher = statistics.fmean(float(r.get("distill/teacher_s", 0.0)) for r in rows)
    # the teacher's scoring runs inside the update on the in-process path
    return {
        "gen_s": gen,
        "update_s": upd,
        "teacher_s": teacher,
        "teacher_share": teacher / max(gen + upd, 1e-9),
    }


def parse_pairs(items: list[str]) -> dict[str, list[str]]:
    """``NAME=a,b,c`` options → {NAME: [a, b, c]} (one entry per seed, in seed order)."""
    out: dict[str, list[str]] = {}
    for item in items:
        name, sep, values = item.partition("=")
        if not sep or not values:
            raise SystemExit(f"expected NAME=v1,v2,... (one value per seed), got {item!r}")
        out[name] = values.split(",")
    return out


def fmt_mean(values: list[float]) -> str:
    """Mean ± the half-width of its 95% t-interval over seeds."""
    mean, half = ci95(values)
    return f"{mean:.2f}" if len(values) < 2 else f"{mean:.2f} ± {half:.2f}"


def report(
    arms: dict[str, list[list[dict[str, Any]]]], after: dict[str, list[float]], targets: list[float]
) -> None:
    print(
        "| arm | seed | batch pass rate per step | "
        + " | ".join(f"first step ≥ {t:g}" for t in targets)
        + " | gen / update / teacher s a step | held-out pass@1 after |"
    )
    print("|---|---|---|" + "---|" * len(targets) + "---|---|")
    reached: dict[tuple[str, float], list[int]] = {}
    for name, runs in arms.items():
        for seed, rows in enumerate(runs):
            curve = [float(r["pass_rate"]) for r in rows]
            firsts = [first_step(curve, t) for t in targets]
            for t, f in zip(targets, firsts, strict=True):
                reached.setdefault((name, t), []).append(f if f is not None else len(curve) + 1)
            cost = step_cost(rows)
            held = after.get(name, [])
            print(
                f"| {name} | {seed} | {', '.join(f'{v:.2f}' for v in curve)} | "
                + " | ".join("never" if f is None else str(f) for f in firsts)
                + f" | {cost['gen_s']:.0f} / {cost['update_s']:.0f} / {cost['teacher_s']:.0f} | "
                + (f"{held[seed]:.2f}" if seed < len(held) else "—")
                + " |"
            )
    print()
    names = list(arms)
    for t in targets:
        means = {n: fmt_mean([float(x) for x in reached[(n, t)]]) for n in names}
        print(
            f"first step with batch pass rate ≥ {t:g} (never = steps + 1): "
            + "; ".join(f"{n} {m}" for n, m in means.items())
        )
    for n in names:
        if n in after:
            print(f"held-out pass@1 after, {n}: {fmt_mean(after[n])}")
    if len(names) == 2:
        a, b = names
        for t in targets:
            diffs = [float(x - y) for x, y in zip(reached[(b, t)], reached[(a, t)], strict=True)]
            print(f"paired steps to ≥ {t:g}, {b} − {a}: {fmt_mean(diffs)}")
        if a in after and b in after:
            diffs = [y - x for x, y in zip(after[a], after[b], strict=True)]
            print(f"paired held-out pass@1 after, {b} − {a}: {fmt_mean(diffs)}")
        share = statistics.fmean(step_cost(rows)["teacher_share"] for rows in arms[b])
        print(f"{b}'s teacher scoring: {share:.0%} of its step time (generation + update) on its machine")


def plot(arms: dict[str, list[list[dict[str, Any]]]], teacher: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, runs in arms.items():
        curves = [[float(r["pass_rate"]) for r in rows] for rows in runs]
        steps = min(len(c) for c in curves)
        mean = [statistics.fmean(c[i] for c in curves) for i in range(steps)]
        (line,) = ax.plot(range(1, steps + 1), mean, lw=2.5, label=f"{name} (mean of {len(curves)} seeds)")
        for c in curves:
            ax.plot(range(1, len(c) + 1), c, alpha=0.3, lw=1, color=line.get_color())
    ax.axhline(teacher, ls="--", c="grey", label=f"teacher held-out pass@1 {teacher:.2f}")
    ax.set_xlabel("RL step")
    ax.set_ylabel("batch pass rate (T = 1)")
    ax.set_title("SmolLM2-135M on calc: RL vs RL + self-distillation")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--arm",
        action="append",
        required=True,
        help="NAME=RUN_DIR,RUN_DIR,... : one run folder (with metrics.jsonl) per seed, seed order",
    )
    ap.add_argument(
        "--after",
        action="append",
        default=[],
        help="NAME=P,P,... : held-out pass@1 after training per seed (learning.py's after_rl)",
    )
    ap.add_argument("--teacher", type=float, required=True, help="the teacher's held-out pass@1")
    ap.add_argument("--targets", default="0.5,0.8", help="lower marks besides --teacher (comma-separated)")
    ap.add_argument("--plot", type=Path, help="write the per-step curves as a PNG here")
    args = ap.parse_args()
    arms = {n: [read_run(Path(d)) for d in dirs] for n, dirs in parse_pairs(args.arm).items()}
    after = {n: [float(v) for v in vs] for n, vs in parse_pairs(args.after).items()}
    targets = sorted({float(t) for t in args.targets.split(",") if t} | {args.teacher})
    report(arms, after, targets)
    if args.plot:
        plot(arms, args.teacher, args.plot)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
