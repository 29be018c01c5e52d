"""``train/optim.py``: the one optimizer and schedule of SFT and RL."""

from __future__ import annotations

import pytest
import torch

from verigym.train.config import build_config
from verigym.train.optim import make_optimizer


def test_sft_and_rl_configs_build_adamw_over_trainable_parameters_only() -> None:
    cfg = build_config({"rl": {"lr": 0.01, "weight_decay": 0.1, "warmup_steps": 2, "lr_schedule": "linear"}})
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1))
    model[0].requires_grad_(False)
    for settings in (cfg.sft, cfg.rl):
        opt, sched = make_optimizer(model.parameters(), settings, 10)
        assert isinstance(opt, torch.optim.AdamW)
        assert [len(g["params"]) for g in opt.param_groups] == [2]
        assert opt.param_groups[0]["weight_decay"] == settings.weight_decay
        assert sched.get_last_lr()[0] == pytest.approx(
            settings.lr / settings.warmup_steps if settings.warmup_steps else settings.lr
        )


def test_linear_schedule_warms_up_then_decays_to_zero() -> None:
    cfg = build_config({"rl": {"lr": 1.0, "warmup_steps": 2, "lr_schedule": "linear"}})
    opt, sched = make_optimizer([torch.nn.Parameter(torch.zeros(1))], cfg.rl, 6)
    lrs = []
    for _ in range(6):
        lrs.append(sched.get_last_lr()[0])
        opt.step()
        sched.step()
    assert lrs == pytest.approx([0.5, 1.0, 1.0, 0.75, 0.5, 0.25])
