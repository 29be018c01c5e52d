"""GRPO with verigym vs TRL's ``GRPOTrainer``: the same tiny model, task, group size, batch, lr and steps.

Both start from the same lightly SFT'd tiny model (built and trained here), train on the arithmetic
environment's train split with the DAPO-style loss (ε 0.2/0.28, token-mean, β = 0), and are then
evaluated by the same verigym evaluator on the same held-out tasks (greedy pass@1). TRL runs in
``.bench/venv`` (``make bench-venv``) as a subprocess; its step time is measured inside the process,
from the first to the last optimizer step, as verigym's is.

    python benchmarks/rl_vs_trl.py [--steps 20] [--groups 8] [--group-size 8] [--threads 1]

Prints seconds per step and held-out pass@1 for each, and the speed ratio (target: verigym ≥ 1.5×).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def _sft_model(out: Path, seed: int) -> Path:
    from verigym.envs.registry import load_env
    from verigym.policies import tiny
    from verigym.train.config import SFTConfig
    from verigym.train.sft import messages_row, oracle_demos, sft_train

    env = load_env("arithmetic", **ENV_ARGS)
    tok = tiny.build_tokenizer()
    model = tiny.build_model("tiny", tok, seed=seed)
    demos = asyncio.run(oracle_demos(env, 400, seed=seed, env_name="arithmetic"))
    rows = [messages_row(tok, d) for d in demos]
    sft_train(
        model, tok, rows, SFTConfig(max_steps=440, batch_size=32, lr=3e-3, lr_schedule="constant"), seed=seed
    )
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return out


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20, help="RL steps for each trainer")
    ap.add_argument("--groups", type=int, default=8, help="tasks (groups) per step")
    ap.add_argument("--group-size", type=int, default=8, help="samples per task")
    ap.add_argument("--lr", type=float, default=1e-3, help="learning rate")
    ap.add_argument("--threads", type=int, default=1, help="torch threads for both")
    ap.add_argument("--eval-tasks", type=int, default=200, help="held-out tasks")
    ap.add_argument("--seed", type=int, default=0, help="seed")
    args = ap.parse_args()
    if not BENCH_PY.exists():
        sys.exit("TRL is not installed: run `make bench-venv` first")
    import torch

    torch.set_num_threads(args.threads)
    from verigym.envs.registry import load_env
    from verigym.train.config import build_config
    from verigym.train.rl import RLTrainer

    work = Path(tempfile.mkdtemp(prefix="rl_vs_trl_"))
    base = _sft_model(work / "sft", args.seed)
    env = load_env("arithmetic", **ENV_ARGS)
    train_tasks = env.tasks(None, seed=args.seed, split="train")
    (work / "tasks.json").write_text(
        json.dumps([{"prompt": t.prompt[0].content, "answer": t.answer} for t in train_tasks])
    )
    p_sft = _evaluate(base, args.eval_tasks, args.seed)

    # TRL
    trl_args = {
        "model": str(base), "tasks": str(work / "tasks.json"), "out": str(work / "trl"), "steps": args.steps,
        "groups": args.groups, "group_size": args.group_size, "lr": args.lr, "max_tokens": MAX_TOKENS,
        "threads": args.threads, "seed": args.seed,
    }  # fmt: skip
    proc = subprocess.run(
        [str(BENCH_PY), "-c", TRL_WORKER, json.dumps(trl_args)], capture_output=True, text=True, cwd=work
    )
    if proc.returncode != 0:
        sys.exit(f"TRL run failed:\n{proc.stderr[-3000:]}")
    trl = json.loads(proc.stdout.strip().splitlines()[-1])
    p_trl = _evaluate(work / "trl" / "final", args.eval_tasks, args.seed)

    # verigym
    from verigym.train._model import load_model

    cfg = build_config(
        {
            "seed": args.seed, "out_dir": str(work / "verigym"),
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
    t0 = time.perf_counter()
    trainer.train()
    total = time.perf_counter() - t0
    vg_step = (stamps[-1] - stamps[0]) / max(len(stamps) - 1, 1)
    model.save_pretrained(work / "verigym" / "final")
    tok.save_pretrained(work / "verigym" / "final")
    p_vg = _evaluate(work / "verigym" / "final", args.eval_tasks, args.seed)

    print(f"same work: tiny model (SFT'd, held-out pass@1 {p_sft:.3f}), arithmetic 2-digit addition, "
          f"{args.groups} groups x {args.group_size} samples, lr {args.lr}, {args.steps} steps, {args.threads} thread(s)")  # fmt: skip
    print(f"{'':10} {'s/step':>8} {'total s':>8} {'pass@1 after':>13}")
    print(f"{'TRL':10} {trl['s_per_step']:8.3f} {trl['total_s']:8.1f} {p_trl:13.3f}")
    print(f"{'verigym':10} {vg_step:8.3f} {total:8.1f} {p_vg:13.3f}")
    print(f"verigym speed-up per step: {trl['s_per_step'] / vg_step:.2f}x (target >= 1.5x)")


if __name__ == "__main__":
    main()
