"""``verigym quickstart``: the whole recipe offline on a laptop CPU in a few minutes.

Build the ``tiny`` model (random weights); SFT it *lightly* on 4,000 oracle demonstrations of the
arithmetic environment (2-digit addition) that its rubric verified, stopping as soon as held-out
greedy pass@1 reaches 0.3 so RL has room; run GRPO with the DAPO preset (lr 3e-4, 100 steps of
16 groups × 8) on the same environment; evaluate again on held-out tasks; write ``summary.json``,
``report.html`` and the checkpoint where ``verigym eval`` finds it (``runs/quickstart/checkpoint``).

Why these numbers (measured over seeds on 2 CPU cores; ``benchmarks/learning.py``):

* Distinct demonstrations, not epochs. 400 demos replayed for 60 epochs left held-out *and* train
  pass@1 near 0.1 after 600 steps on half the seeds; 4,000 demos (≈ 6 epochs in the same steps)
  cross the tiny model's sharp learning transition at 300–600 steps on every seed.
* The SFT target stops inside that transition: pass@1 climbs 0.15 → 0.45 in ~40 steps, so the
  target is checked every 20 steps.
* RL lr 3e-4, not 1e-3: with Adam every step moves the weights by about lr whatever the gradient's
  noise; at 128 samples per step 1e-3 made held-out pass@1 wander (0.44 → 0.36 → 0.40 in 30 steps)
  while 3e-4 climbs steadily; 100 steps leave time for it.

``learning_run`` is one seed of that recipe plus its control (the same RL with rewards shuffled
across the batch, from the same SFT weights): what the learning test and ``benchmarks/learning.py``
measure.
"""

from __future__ import annotations

import copy
import gc
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from verigym._files import write_json
from verigym.train.config import TrainConfig, apply_overrides, build_config
from verigym.train.rl import Progress

__all__ = ["learning_run", "quickstart", "quickstart_config", "recipe_config"]


def quickstart_config(
    out_dir: str | Path = "runs/quickstart", *, seed: int = 0, **overrides: Any
) -> TrainConfig:
    """The quickstart's settings (``overrides`` are dotted keys with ``__`` for dots, e.g. ``rl__steps=10``)."""
    raw: dict[str, Any] = {
        "seed": seed,
        "out_dir": str(out_dir),
        "model": {"tiny": "tiny", "seed": seed},
        "envs": [{"name": "arithmetic", "args": {"level": 1}}],
        "sampling": {"temperature": 1.0, "max_tokens": 6},
        "sft": {
            "demos": 4000,
            "max_steps": 3000,  # seed 7 crosses the transition only at ~2,360 steps
            "batch_size": 32,
            "lr": 3e-3,
            "lr_schedule": "constant",
            "eval_every": 20,
            "target_pass_at_1": 0.3,
        },
        "rl": {
            "preset": "dapo",
            "steps": 100,
            "groups_per_step": 16,
            "group_size": 8,
            "lr": 3e-4,
            "max_rounds": 2,
            "eval_every": 10,  # the held-out pass@1 curve in report.html
        },
        "eval": {"tasks": 200, "samples": 1, "temperature": 0.0},
        "logging": {"checkpoint_every": 0},
    }
    return recipe_config(raw, overrides, source="quickstart")


def recipe_config(raw: dict[str, Any], overrides: dict[str, Any], *, source: str) -> TrainConfig:
    """A recipe's raw settings with ``overrides`` applied (dotted keys written with ``__``, e.g.
    ``rl__steps=10``, so they pass as keyword arguments), validated."""
    return build_config(
        apply_overrides(raw, {k.replace("__", "."): v for k, v in overrides.items()}), source=source
    )


def quickstart(cfg: TrainConfig | None = None, *, progress: Progress | None = None) -> dict[str, Any]:
    """Run the quickstart; returns the summary written to ``summary.json``."""
    from verigym.train.pipeline import run_train, write_summary

    cfg = cfg or quickstart_config()
    t0 = time.perf_counter()
    summary = run_train(cfg, progress=progress)
    summary["wall_s"] = time.perf_counter() - t0
    ordered = {
        k: summary.get(k)
        for k in (
            "pass_at_1_initial",
            "pass_at_1_after_sft",
            "pass_at_1_after_rl",
            "sft_steps",
            "steps",
            "wall_s",
        )
    }
    ordered.update({k: v for k, v in summary.items() if k not in ordered})
    write_summary(cfg.out_dir, ordered)  # with run_train's run header
    return ordered


def learning_run(
    cfg: TrainConfig,
    *,
    control: bool = True,
    sft_cache: str | Path | None = None,
    graders: Sequence[str] = (),
    greedy: bool = False,
) -> dict[str, Any]:
    """One seed of a recipe: SFT (as ``cfg.sft`` asks), then RL, then — from the same SFT weights —
    the same RL with rewards shuffled across the batch. Returns held-out pass@1 after each stage
    (``after_sft``, ``after_rl``, ``after_shuffled``) and, for each name in ``graders``, that grader's
    held-out mean (``NAME_sft``, ``NAME_rl``, ``NAME_shuffled``; e.g. ``tool_call_ok`` of ``calc``).

    ``sft_cache``: a file for the SFT weights — loaded when it exists, written after SFT otherwise
    (several RL recipes from one SFT start). Nothing else is written but the two RL runs' metrics
    (``out_dir/rl``, ``out_dir/shuffled``). ``greedy``: also held-out greedy pass@1 (``greedy_STAGE``)
    where ``cfg.eval`` samples.
    """
    import torch

    from verigym.train import load_model
    from verigym.train.pipeline import sft_warmup
    from verigym.train.rl import RLTrainer, load_envs

    out = Path(cfg.out_dir)
    env = cfg.envs[0].name
    t0 = time.perf_counter()
    model, tok = load_model(cfg.model)
    envs = load_envs(cfg)
    trainer = RLTrainer(cfg, model=model, tokenizer=tok, envs=envs, out_dir=out / "rl")
    result: dict[str, Any] = {"seed": cfg.seed, "preset": cfg.rl.preset}

    def measure(t: RLTrainer, stage: str) -> None:
        ev = t.evaluate()  # once per stage: a sampled eval draws from the trainer's RNG
        result[f"after_{stage}"] = ev["eval/pass_at_1"]
        for name in graders:
            result[f"{name}_{stage}"] = ev[f"eval/{env}/grader/{name}"]
        if greedy and cfg.eval.temperature > 0:
            result[f"greedy_{stage}"] = t.evaluate(greedy=True)["eval/pass_at_1"]

    cache = Path(sft_cache) if sft_cache is not None else None
    if cache is not None and cache.is_file():
        model.load_state_dict(torch.load(cache))
        result["sft_steps"] = json.loads(cache.with_suffix(".json").read_text())["sft_steps"]
    elif cfg.sft.data or cfg.sft.demos:
        sft = sft_warmup(cfg, model, tok, trainer)
        result["sft_steps"] = sft["steps"]
        if cache is not None:
            torch.save(model.state_dict(), cache)
            write_json(cache.with_suffix(".json"), {"sft_steps": sft["steps"]}, indent=None)
    measure(trainer, "sft")
    sft_weights = copy.deepcopy(model.state_dict())
    t1 = time.perf_counter()
    history = trainer.train()
    trainer.finish_training()  # AdamW's moments not held through the evals and the control
    result["max_logprob_diff"] = max((h.get("logprob_diff", 0.0) for h in history), default=0.0)
    measure(trainer, "rl")
    result["lift"] = result["after_rl"] - result["after_sft"]
    result["rl_s_per_step"] = (time.perf_counter() - t1) / max(cfg.rl.steps, 1)
    result["train_s"] = time.perf_counter() - t0  # SFT + RL + their evals, without the control
    if control:
        model.load_state_dict(sft_weights)
        # the first run's optimizer state and sampler caches (1.6 GB on SmolLM2-135M) are not needed
        # again: without this a real-model control peaked at 10 GB RSS and was OOM-killed beside others
        del trainer, sft_weights
        gc.collect()
        shuffled_cfg = cfg.model_copy(update={"rl": cfg.rl.model_copy(update={"shuffle_rewards": True})})
        shuffled = RLTrainer(shuffled_cfg, model=model, tokenizer=tok, envs=envs, out_dir=out / "shuffled")
        shuffled.train()
        measure(shuffled, "shuffled")
        result["shuffled_lift"] = result["after_shuffled"] - result["after_sft"]
    result["wall_s"] = time.perf_counter() - t0
    return result
