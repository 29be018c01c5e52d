"""The TRL side of ``benchmarks/rl_vs_trl.py``: TRL's ``GRPOTrainer`` on one job, in the peer's venv.

Run by that script as ``.bench/venv/bin/python benchmarks/_trl_grpo_side.py JOB.json`` with
``PYTHONPATH=src`` so that the reward is verigym's own arithmetic check (``parse_integer`` against
the reference), the same function that grades verigym's side. Nothing else of verigym is imported.
Writes ``OUT/result.json`` (seconds per step, each step's wall time, peak RSS) and the trained model
to ``OUT/model`` for the caller to evaluate on the held-out split.
"""

from __future__ import annotations

import json
import resource
import sys
import time
from pathlib import Path
from typing import Any


def main() -> None:
    job = json.loads(Path(sys.argv[1]).read_text())
    import torch

    torch.set_num_threads(job["threads"])
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from verigym.envs.builtin.arithmetic import parse_integer

    out = Path(job["out"])

    def correct(completions: list[list[dict[str, str]]], answer: list[str], **_: Any) -> list[float]:
        return [
            float(parse_integer(c[-1]["content"]) == int(a)) for c, a in zip(completions, answer, strict=True)
        ]

    class StepClock(TrainerCallback):  # type: ignore[misc]
        def __init__(self) -> None:
            self.times: list[float] = []
            self.t0 = 0.0

        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.t0 = time.perf_counter()

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            self.times.append(time.perf_counter() - self.t0)

    rl = job["rl"]
    args = GRPOConfig(
        output_dir=str(out / "trl"),
        seed=job["seed"],
        use_cpu=True,
        bf16=False,
        max_steps=rl["steps"],
        learning_rate=rl["lr"],
        lr_scheduler_type="constant",
        warmup_steps=0,
        weight_decay=0.0,
        max_grad_norm=rl["max_grad_norm"],
        per_device_train_batch_size=rl["groups_per_step"] * rl["group_size"],
        gradient_accumulation_steps=1,
        num_generations=rl["group_size"],
        num_iterations=1,
        max_completion_length=job["max_tokens"],
        temperature=job["temperature"],
        top_p=1.0,
        beta=0.0,
        loss_type="dapo",
        epsilon=rl["eps_low"],
        epsilon_high=rl["eps_high"],
        scale_rewards="group",
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    data = Dataset.from_list(
        [{"prompt": p, "answer": a} for p, a in zip(job["prompts"], job["answers"], strict=True)]
    )
    clock = StepClock()
    trainer = GRPOTrainer(
        model=job["model"], reward_funcs=correct, args=args, train_dataset=data, callbacks=[clock]
    )
    t0 = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - t0
    trainer.model.save_pretrained(out / "model")
    trainer.processing_class.save_pretrained(out / "model")
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    result = {
        "s_per_step": wall / rl["steps"],
        "step_times": clock.times,
        "train_reward": rewards,
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
    }
    (out / "result.json").write_text(json.dumps(result))


if __name__ == "__main__":
    main()
