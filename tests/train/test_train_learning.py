"""Learning: the quickstart recipe on 2-digit addition. After a light SFT, GRPO (DAPO preset) raises
held-out pass@1 by a clear margin, while the same run with rewards shuffled across the batch does not —
so the lift comes from the verifier's signal, not from more updates.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from verigym.train._model import load_model
from verigym.train.pipeline import build_sft_rows
from verigym.train.quickstart import quickstart_config
from verigym.train.rl import RLTrainer
from verigym.train.sft import sft_train

torch.set_num_threads(1)

RL_STEPS = 20


@pytest.mark.slow
def test_grpo_lifts_held_out_pass_at_1_and_shuffled_rewards_do_not(tmp_path: Path) -> None:
    cfg = quickstart_config(
        tmp_path / "real", rl__steps=RL_STEPS, sft__eval_every=40, sft__target_pass_at_1=0.3
    )
    model, tok = load_model(cfg.model)
    real = RLTrainer(cfg, model=model, tokenizer=tok)
    rows = build_sft_rows(cfg, tok, real.envs)
    assert len(rows) == cfg.sft.demos  # every oracle demonstration passed the rubric
    sft = sft_train(
        model, tok, rows, cfg.sft, seed=cfg.seed, evaluate=lambda: real.evaluate()["eval/pass_at_1"]
    )
    after_sft = real.evaluate()["eval/pass_at_1"]
    assert sft["stopped_early"] and 0.3 <= after_sft < 0.8, f"SFT should stop light, got {sft} / {after_sft}"
    sft_model = copy.deepcopy(model)

    real.train()
    after_rl = real.evaluate()["eval/pass_at_1"]

    ctrl_cfg = quickstart_config(tmp_path / "shuffled", rl__steps=RL_STEPS, rl__shuffle_rewards=True)
    control = RLTrainer(ctrl_cfg, model=sft_model, tokenizer=tok)
    control.train()
    after_shuffled = control.evaluate()["eval/pass_at_1"]

    msg = f"pass@1 after SFT {after_sft:.3f}, after GRPO {after_rl:.3f}, with shuffled rewards {after_shuffled:.3f}"
    print(msg)  # shown with pytest -s
    assert after_rl >= after_sft + 0.07, msg
    assert after_shuffled <= after_sft + 0.01, msg
    assert all(h["logprob_diff"] < 1e-3 for h in real.history), (
        "on-policy: sampling and training logprobs agree"
    )
