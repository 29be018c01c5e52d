"""Policy losses as registered, typed parts (issue 25 item 3): the update dispatches every registered
loss to its own function, an unregistered name is a one-line config error, and a loss is spelled as
a ``{kind = ...}`` table or as the name with the old flat keys, with the same result."""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from pydantic import BaseModel, ValidationError

from verigym.train import loss_registry as R
from verigym.train import losses as L
from verigym.train._update import UpdateState, policy_update
from verigym.train.config import ConfigError, TrainConfig, build_config, load_config
from verigym.train.optim import make_scheduler
from verigym.train.samples import Row

torch.set_num_threads(1)

# each built-in loss and the function in train.losses it must reach
OWN = {"ppo": "ppo_clip_loss", "gspo": "gspo_loss", "clip_cov": "clip_cov_loss", "kl_cov": "kl_cov_loss"}


def _update(rl: dict[str, Any]) -> None:
    from verigym.policies.tiny import build_model, build_tokenizer

    model = build_model("tiny", build_tokenizer(), seed=0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    state = UpdateState(opt, make_scheduler(opt, "constant", 0, 10), torch.Generator())
    row = Row(ids=[5, 17, 11, 82, 10, 11, 12, 2], mask=[0, 0, 0, 0, 1, 1, 1, 1], logprobs=None, advantage=1.0)
    policy_update(
        model,
        [row],
        build_config({"rl": {"kl_beta": 0.0, **rl}}).rl,
        state,
        pad_id=0,
        temperature=1.0,
        max_len=8,
    )


def test_every_registered_loss_dispatches_to_its_own_function(monkeypatch: pytest.MonkeyPatch) -> None:
    assert set(R.LOSSES) == set(OWN)  # a new loss: add it here, with the function it must reach
    for kind, own in OWN.items():
        calls: list[str] = []
        for fn in OWN.values():
            original = getattr(L, fn)

            def record(
                *a: Any, _fn: str = fn, _orig: Any = original, _calls: list[str] = calls, **k: Any
            ) -> L.PolicyLoss:
                _calls.append(_fn)
                return _orig(*a, **k)  # type: ignore[no-any-return]

            monkeypatch.setattr(L, fn, record)
        _update({"loss": kind})
        monkeypatch.undo()
        # clip_cov is PPO-clip plus its own step: it reaches ppo_clip_loss from inside clip_cov_loss
        assert (
            calls
            and calls[0] == own
            and set(calls) <= {own, *(["ppo_clip_loss"] if kind == "clip_cov" else [])}
        ), (kind, calls)


def test_the_update_calls_the_registered_function_with_the_loss_options(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for kind in R.LOSSES:
        seen: list[BaseModel] = []
        spec = R.LOSSES[kind]

        def fn(x: R.LossInputs, o: Any, _orig: Any = spec.fn, _seen: list[BaseModel] = seen) -> L.PolicyLoss:
            _seen.append(o)
            return _orig(x, o)  # type: ignore[no-any-return]

        monkeypatch.setitem(R.LOSSES, kind, R.LossSpec(kind, spec.options, fn))
        _update({"preset": kind if kind in ("gspo", "clip_cov", "kl_cov") else "dapo", "loss": kind})
        assert [type(o) for o in seen] == [spec.options], kind


def test_an_unregistered_loss_is_a_one_line_config_error(tmp_path: Any) -> None:
    with pytest.raises(
        ConfigError, match=r"^config: rl\.loss: unknown loss 'nope'; expected one of .*ppo"
    ) as err:
        build_config({"rl": {"loss": "nope"}})
    assert "\n" not in str(err.value)
    path = tmp_path / "c.toml"
    path.write_text('[rl]\nloss = {kind = "ppo2"}\n')
    with pytest.raises(ConfigError, match=r"c\.toml: rl\.loss: unknown loss 'ppo2'"):
        load_config(path)
    with pytest.raises(
        ConfigError, match=r"rl\.loss_options: dual_clip: unknown key \(loss gspo takes eps_low, eps_high\)"
    ):
        build_config({"rl": {"loss": {"kind": "gspo", "dual_clip": 3.0}}})
    with pytest.raises(ConfigError, match=r"rl\.loss_options: delta must exceed 1 \+ eps_high"):
        build_config({"rl": {"delta": 1.1}})
    with pytest.raises(ValidationError, match=r"a loss table needs its kind"):
        TrainConfig.model_validate({"rl": {"loss": {"eps_low": 0.1}}})
    with pytest.raises(ValueError, match="already registered"):
        R.register_loss("ppo", R.PPOOptions, lambda x, o: L.ppo_clip_loss(x.logp, x.old, x.adv))


def test_a_table_and_flat_keys_give_the_same_typed_options(tmp_path: Any) -> None:
    flat = build_config(
        {"rl": {"preset": "grpo", "loss": "clip_cov", "eps_high": 0.28, "clip_cov_ratio": 0.1}}
    ).rl
    table = build_config({"rl": {"loss": {"kind": "clip_cov", "eps_high": 0.28, "clip_cov_ratio": 0.1}}}).rl
    assert flat.loss == table.loss == "clip_cov"
    assert flat.loss_options == table.loss_options == R.ClipCovOptions(eps_high=0.28, clip_cov_ratio=0.1)
    # flat keys the loss does not take are ignored (presets set clip ranges for whichever loss runs)
    kl = build_config({"rl": {"preset": "dapo", "loss": "kl_cov", "kl_cov_beta": 0.5}}).rl
    assert kl.loss_options == R.KLCovOptions(kl_cov_beta=0.5) and kl.eps_low is None
    # a table's options beat the preset's flat keys; a flat key (an override) beats the table
    gspo = build_config({"rl": {"preset": "gspo", "loss": {"kind": "gspo", "eps_low": 1e-3}}}).rl
    assert gspo.loss_options == R.GSPOOptions(eps_low=1e-3, eps_high=4e-4)
    path = tmp_path / "c.toml"
    path.write_text('[rl]\npreset = "dapo"\nloss = {kind = "ppo", eps_high = 0.25}\n')
    assert load_config(path).rl.eps_high == 0.25
    assert load_config(path, {"rl.eps_high": 0.3}).rl.eps_high == 0.3
    assert load_config(path, {"rl.loss.dual_clip": 3.0}).rl.loss_options == R.PPOOptions(
        eps_high=0.25, dual_clip=3.0
    )
    # a table without its kind (an override into a preset's loss) is the preset's loss
    gspo = build_config({"rl": {"preset": "gspo", "loss": {"eps_high": 1e-3}}}).rl
    assert gspo.loss_options == R.GSPOOptions(eps_low=3e-4, eps_high=1e-3)
    assert load_config(None, {"rl.loss.eps_high": 0.3}).rl.loss_options == R.PPOOptions(eps_high=0.3)


def test_saved_configs_round_trip_and_old_flat_ones_load() -> None:
    cfg = build_config({"rl": {"preset": "gspo"}})
    saved = json.loads(cfg.model_dump_json())
    assert saved["rl"]["loss"] == "gspo" and saved["rl"]["loss_options"] == {
        "eps_low": 3e-4,
        "eps_high": 4e-4,
    }
    assert TrainConfig.model_validate_json(cfg.model_dump_json()) == cfg
    old = {  # a train_config.json written before the registry: every loss's options, flat
        **{k: v for k, v in saved["rl"].items() if k != "loss_options"},
        "eps_low": 3e-4, "eps_high": 4e-4, "dual_clip": None, "delta": None, "clip_cov_ratio": 2e-4,
        "clip_cov_lb": 1.0, "clip_cov_ub": 5.0, "kl_cov_ratio": 2e-3, "kl_cov_beta": 1.0,
    }  # fmt: skip
    assert TrainConfig.model_validate({**saved, "rl": old}) == cfg
    cfg.rl.loss = "clip_cov"  # assignment re-validates: the new loss's model, keeping what applies
    assert cfg.rl.loss_options == R.ClipCovOptions(eps_low=3e-4, eps_high=4e-4)
