"""GRPO with verigym vs TRL's ``GRPOTrainer``: the same tiny model, task, group size, batch, lr and steps.

Both start from the same lightly SFT'd tiny model (built and trained here), train on the arithmetic
environment's train split with the DAPO-style loss (ε 0.2/0.28, token-mean, β = 0), and are then
evaluated by the same verigym evaluator on the same held-out tasks (greedy pass@1). TRL runs in
``.bench/venv`` (``make bench-venv``) as a subprocess; its step time is measured inside the process,
from the first to the last optimizer step, as verigym's is.

    python benchmarks/rl_vs_trl.py --seeds 0-2 [--steps 100] [--groups 16] [--group-size 8] [--threads 1]

Per seed: the quickstart recipe's SFT checkpoint (held-out pass@1 0.25–0.6, room to learn), then TRL
and verigym from it, the side that goes first alternating by seed. Prints seconds per step and
held-out pass@1 after for each pair, the median ratio, and MET / NOT MET against the targets
(issue 12: ≥ 1.5× in every pair and mean pass@1 after ≥ TRL's; issue 17: ≥ 2× in every pair).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from learning import parse_seeds

ROOT = Path(__file__).resolve().parents[1]
BENCH_PY = ROOT / ".bench" / "venv" / "bin" / "python"
ENV_ARGS = {"level": 1}  # the quickstart task: 2-digit addition, "12+34="
MAX_TOKENS = 6

TRL_WORKER = r"""
import json, re, sys, time
import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

a = json.loads(sys.argv[1])
torch.set_num_threads(a["threads"])
data = json.load(open(a["tasks"]))
tok = AutoTokenizer.from_pretrained(a["model"])
model = AutoModelForCausalLM.from_pretrained(a["model"], dtype=torch.float32)
ds = Dataset.from_list([{"prompt": [{"role": "user", "content": t["prompt"]}], "answer": t["answer"]} for t in data])
INT = re.compile(r"-?\d+")

def correct(completions, answer, **kw):
    out = []
    for c, ans in zip(completions, answer):
        found = INT.findall(c[0]["content"] if isinstance(c, list) else c)
        out.append(1.0 if found and found[-1] == ans else 0.0)
    return out

class Clock(TrainerCallback):
    def __init__(self):
        self.t = []
    def on_step_end(self, args, state, control, **kw):
        self.t.append(time.perf_counter())

batch = a["groups"] * a["group_size"]
cfg = GRPOConfig(
    output_dir=a["out"], max_steps=a["steps"], learning_rate=a["lr"], per_device_train_batch_size=batch,
    gradient_accumulation_steps=1, num_generations=a["group_size"], max_completion_length=a["max_tokens"],
    temperature=1.0, beta=0.0, epsilon=0.2, epsilon_high=0.28, loss_type="dapo", scale_rewards="group",
    logging_steps=1, report_to=[], use_cpu=True, bf16=False, save_strategy="no", seed=a["seed"],
    lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0, disable_tqdm=True,
    dataloader_num_workers=0,
)
clock = Clock()
trainer = GRPOTrainer(model=model, reward_funcs=[correct], args=cfg, train_dataset=ds, processing_class=tok, callbacks=[clock])
t0 = time.perf_counter()
trainer.train()
total = time.perf_counter() - t0
per_step = (clock.t[-1] - clock.t[0]) / max(len(clock.t) - 1, 1) if len(clock.t) > 1 else total
trainer.model.save_pretrained(a["out"] + "/final")
tok.save_pretrained(a["out"] + "/final")
print(json.dumps({"s_per_step": per_step, "total_s": total, "steps": len(clock.t)}))
"""


def _sft_model(out: Path, seed: int) -> tuple[Path, float]:
    """The quickstart recipe's SFT phase (stopped at its held-out target), saved to ``out``."""
    from verigym.recipes.quickstart import quickstart_config
    from verigym.train import load_model
    from verigym.train.pipeline import build_sft_rows, save_final
    from verigym.train.rl import RLTrainer
    from verigym.train.sft import sft_train

    cfg = quickstart_config(out.parent / "sft-run", seed=seed)
    model, tok = load_model(cfg.model)
    trainer = RLTrainer(cfg, model=model, tokenizer=tok)
    rows = build_sft_rows(cfg, tok, trainer.envs)
    sft_train(model, tok, rows, cfg.sft, seed=seed, evaluate=lambda: trainer.evaluate()["eval/pass_at_1"])
    save_final(model, tok, out)
    return out, trainer.evaluate()["eval/pass_at_1"]


def _evaluate(path: Path, tasks: int, seed: int) -> float:
    from verigym.envs.registry import load_env
    from verigym.policies.local import LocalPolicy
    from verigym.train._model import evaluate
    from verigym.types import Sampling

    env = load_env("arithmetic", **ENV_ARGS)
    policy = LocalPolicy.from_pretrained(path, device="cpu")
    res = asyncio.run(
        evaluate(
            env,
            policy,
            env.tasks(tasks, seed=seed, split="test"),
            sampling=Sampling(temperature=0.0, max_tokens=MAX_TOKENS),
        )
    )
    return res["pass_at_1"]


def run_trl(base: Path, work: Path, args: argparse.Namespace, seed: int) -> tuple[float, float]:
    """TRL's GRPOTrainer in ``.bench/venv``: (s/step, held-out pass@1 after)."""
    trl_args = {
        "model": str(base), "tasks": str(work / "tasks.json"), "out": str(work / "trl"), "steps": args.steps,
        "groups": args.groups, "group_size": args.group_size, "lr": args.lr, "max_tokens": MAX_TOKENS,
        "threads": args.threads, "seed": seed,
    }  # fmt: skip
    proc = subprocess.run(
        [str(BENCH_PY), "-c", TRL_WORKER, json.dumps(trl_args)], capture_output=True, text=True, cwd=work
    )
    if proc.returncode != 0:
        sys.exit(f"TRL run failed:\n{proc.stderr[-3000:]}")
    trl = json.loads(proc.stdout.strip().splitlines()[-1])
    return float(trl["s_per_step"]), _evaluate(work / "trl" / "final", args.eval_tasks, seed)


def run_verigym(base: Path, work: Path, args: argparse.Namespace, seed: int) -> tuple[float, float]:
    """verigym's RLTrainer on the same work: (s/step, held-out pass@1 after)."""
    from verigym.train import load_model
    from verigym.train.config import build_config
    from verigym.train.pipeline import save_final
    from verigym.train.rl import RLTrainer

    cfg = build_config(
        {
            "seed": seed, "out_dir": str(work / "verigym"),
            "model": {"path": str(base)}, "envs": [{"name": "arithmetic", "args": ENV_ARGS}],
            "sampling": {"temperature": 1.0, "max_tokens": MAX_TOKENS},
            "rl": {"preset": "dapo", "dynamic_sampling": False, "overlong_buffer": 0, "steps": args.steps,
                   "groups_per_step": args.groups, "group_size": args.group_size, "lr": args.lr},
            "logging": {"report": False},
        }
    )  # fmt: skip
    model, tok = load_model(cfg.model)
    trainer = RLTrainer(cfg, model=model, tokenizer=tok)
    stamps: list[float] = []
    trainer.progress = lambda event, info: stamps.append(time.perf_counter()) if event == "step" else None
    trainer.train()
    save_final(model, tok, work / "verigym" / "final")
    per_step = (stamps[-1] - stamps[0]) / max(len(stamps) - 1, 1)
    return per_step, _evaluate(work / "verigym" / "final", args.eval_tasks, seed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0-2", help="seeds: 0-2 or 0,3 (one SFT checkpoint and one pair each)")
    ap.add_argument("--steps", type=int, default=100, help="RL steps for each trainer")
    ap.add_argument("--groups", type=int, default=16, help="tasks (groups) per step")
    ap.add_argument("--group-size", type=int, default=8, help="samples per task")
    ap.add_argument("--lr", type=float, default=3e-4, help="learning rate (the quickstart's)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads for both")
    ap.add_argument("--eval-tasks", type=int, default=200, help="held-out tasks")
    args = ap.parse_args()
    if not BENCH_PY.exists():
        sys.exit("TRL is not installed: run `make bench-venv` first")
    import torch

    torch.set_num_threads(args.threads)
    from verigym.envs.registry import load_env

    rows = []
    for i, seed in enumerate(parse_seeds(args.seeds)):
        work = Path(tempfile.mkdtemp(prefix=f"rl_vs_trl_{seed}_"))
        base, p_sft = _sft_model(work / "sft", seed)
        env = load_env("arithmetic", **ENV_ARGS)
        tasks = env.tasks(None, seed=seed, split="train")
        (work / "tasks.json").write_text(
            json.dumps([{"prompt": t.prompt[0].content, "answer": t.answer} for t in tasks])
        )
        sides = [("trl", run_trl), ("verigym", run_verigym)]
        out: dict[str, tuple[float, float]] = {}
        for name, fn in sides if i % 2 == 0 else sides[::-1]:  # alternate who goes first
            out[name] = fn(base, work, args, seed)
        row = {"seed": seed, "sft": p_sft, "trl": out["trl"], "verigym": out["verigym"]}
        rows.append(row)
        print(json.dumps(row), flush=True)

    print(f"same work per seed: tiny model SFT'd by the quickstart recipe, 2-digit addition, {args.groups} groups x "
          f"{args.group_size}, lr {args.lr}, {args.steps} steps, DAPO loss (eps 0.2/0.28, token-mean, beta 0), "
          f"{args.threads} thread(s); sides alternate first/second by seed")  # fmt: skip
    print("| seed | SFT pass@1 | TRL s/step | verigym s/step | speed-up | pass@1 after TRL / verigym |")
    print("|---|---|---|---|---|---|")
    ratios = []
    for r in rows:
        ratio = r["trl"][0] / r["verigym"][0]
        ratios.append(ratio)
        print(f"| {r['seed']} | {r['sft']:.3f} | {r['trl'][0]:.3f} | {r['verigym'][0]:.3f} | {ratio:.2f}x | "
              f"{r['trl'][1]:.3f} / {r['verigym'][1]:.3f} |")  # fmt: skip
    p_trl = statistics.fmean(r["trl"][1] for r in rows)
    p_vg = statistics.fmean(r["verigym"][1] for r in rows)
    print(f"median speed-up {statistics.median(ratios):.2f}x, min {min(ratios):.2f}x; mean pass@1 after: "
          f"TRL {p_trl:.3f}, verigym {p_vg:.3f}")  # fmt: skip
    print(f"speed ≥ 1.5x in every pair: {'MET' if min(ratios) >= 1.5 else 'NOT MET'}; "
          f"speed ≥ 2x in every pair (issue 17): {'MET' if min(ratios) >= 2.0 else 'NOT MET'}; "
          f"mean pass@1 after ≥ TRL's: {'MET' if p_vg >= p_trl else 'NOT MET'}")  # fmt: skip


if __name__ == "__main__":
    main()
