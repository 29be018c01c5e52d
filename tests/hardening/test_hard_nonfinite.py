"""Never a broken model, never a lost run (issue 42 items 1 and 7): non-finite rewards, losses,
gradients and config numbers; runs where every sample errored; ``sys.exit`` in environment code."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file
from typer.testing import CliRunner

from verigym.cli import app
from verigym.rubric import Grader, Penalty, Rubric
from verigym.train.config import ConfigError, build_config
from verigym.types import Message, Task, Trajectory

torch.set_num_threads(1)
runner = CliRunner()
HERE = Path(__file__).parent
ENVS = HERE / "nonfinite_envs.py"
HUGE = 1e308
INF = float("inf")
NAN = float("nan")


def _strict_json(path: Path) -> Any:
    def refuse(constant: str) -> Any:
        raise AssertionError(f"{path}: {constant} is not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


def _one(result: Any) -> str:
    """The error line of a failed command (no traceback)."""
    assert "Traceback" not in result.output, result.output
    return " ".join(result.output.split())


# ---- the rubric: a reward is always finite ------------------------------------------------------


def _traj(text: str) -> tuple[Task, Trajectory]:
    task = Task(id="t", prompt=(Message(role="user", content="q"),), answer="4")
    return task, Trajectory(task_id="t", prompt=[Message(role="user", content="q")])


@pytest.mark.parametrize(
    ("weights", "amounts"),
    [
        ([HUGE, HUGE], []),  # finite grades, a weighted total that overflows to inf
        ([-HUGE, -HUGE], []),
        ([INF], []),  # an infinite weight on a grade of 1
        ([1.0], [HUGE, HUGE]),  # penalty amounts that overflow
        ([1.0], [INF]),
    ],
)
def test_a_reward_total_or_penalty_sum_that_is_not_finite_errors_the_sample(
    weights: list[float], amounts: list[float]
) -> None:
    graders = [Grader(lambda t, tr: 1.0, weight=w, name=f"g{i}") for i, w in enumerate(weights)]
    penalties = [Penalty(Grader(lambda t, tr: 1.0, name=f"p{i}"), a) for i, a in enumerate(amounts)]
    score = asyncio.run(Rubric(graders, penalties=penalties).score(*_traj("4")))
    assert score.reward is None and score.error is not None and "not finite" in score.error


def test_a_finite_total_near_the_limit_is_still_a_reward() -> None:
    score = asyncio.run(Rubric([Grader(lambda t, tr: 1.0, weight=HUGE)]).score(*_traj("4")))
    assert score.error is None and score.reward == HUGE


# ---- eval: summary.json is JSON, and --resume gives the same answer -------------------------------


def test_eval_of_overflowing_rewards_writes_json_and_resume_agrees(tmp_path: Path) -> None:
    out = tmp_path / "e"
    args = ["eval", f"{ENVS}:OverflowEnv", "--policy", "oracle", "-n", "3", "--out", str(out)]
    first = runner.invoke(app, args)
    assert first.exit_code == 1, first.output  # every sample errored: not a success
    text = _one(first)
    assert "3 of 3 samples errored (first: grader: the reward total is not finite" in text
    summary = _strict_json(out / "summary.json")
    assert summary["n_errors"] == 3 and summary["n_scored"] == 0
    assert summary["pass_at_k"] == {"1": None} and summary["reward_mean"] is None  # nothing scored
    again = runner.invoke(app, [*args, "--resume"])
    assert again.exit_code == 1, again.output
    resumed = _strict_json(out / "summary.json")
    assert {k: resumed[k] for k in ("n_errors", "n_scored", "pass_at_k", "errors_by_kind")} == {
        k: summary[k] for k in ("n_errors", "n_scored", "pass_at_k", "errors_by_kind")
    }


# ---- sys.exit in environment code -----------------------------------------------------------------


def test_sys_exit_in_an_environment_is_an_errored_sample_and_resume_goes_on(tmp_path: Path) -> None:
    out = tmp_path / "x"
    args = ["eval", f"{ENVS}:ExitEnv", "--env-arg", "every=false", "--policy", "oracle", "-n", "6"]
    result = runner.invoke(app, [*args, "--out", str(out), "--concurrency", "1"])
    assert result.exit_code == 1, result.output  # errored samples: not a success, yet nothing died
    text = _one(result)
    assert (
        "2 of 6 samples errored (first: environment: SystemExit(3): environment code called sys.exit)" in text
    )
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sum(r["error"] is not None for r in rows) == 2
    resumed = runner.invoke(app, [*args, "--out", str(out), "--resume", "--concurrency", "1"])
    assert resumed.exit_code == 1, resumed.output  # the errored ones are redone (and error again)
    assert "exit 1: 1 of 6 samples errored" in _one(resumed)  # one of the two redone errs again


# ---- config numbers: finite and within float32 range ----------------------------------------------


@pytest.mark.parametrize("value", [INF, -INF, NAN, 1e300, -1e300, 3.5e38])
@pytest.mark.parametrize(
    "key",
    ["rl.lr", "rl.entropy_coef", "rl.max_grad_norm", "sampling.temperature", "sft.lr", "rl.adv_eps"],
)
def test_train_config_numbers_must_be_finite_float32(key: str, value: float) -> None:
    section, name = key.split(".")
    with pytest.raises(ConfigError) as info:
        build_config({section: {name: value}})
    assert key in str(info.value)


@pytest.mark.parametrize("value", [INF, 1e300, NAN])
def test_nested_train_numbers_are_checked_too(value: float) -> None:
    for raw in (
        {"rl": {"grader_weights": {"exact": value}}},
        {"rl": {"param_noise": [[0, 0.1], [10, value]]}},
        {"envs": [{"name": "arithmetic", "weight": value}]},
    ):
        with pytest.raises(ConfigError, match=r"finite|float32"):
            build_config(raw)


def test_float32_extremes_that_fit_are_accepted() -> None:
    cfg = build_config({"rl": {"lr": 3.4e38, "entropy_coef": -3.4e38, "adv_eps": 1e-45}})
    assert cfg.rl.lr == 3.4e38


@pytest.mark.parametrize("flag", ["--temperature", "--timeout"])
@pytest.mark.parametrize("value", ["inf", "nan", "1e300"])
def test_eval_config_numbers_are_one_line_exit_2(flag: str, value: str, tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["eval", "arithmetic", "--policy", "oracle", flag, value, "--out", str(tmp_path)]
    )
    assert result.exit_code == 2, result.output
    assert flag.lstrip("-") in _one(result)


# ---- the update: a non-finite loss or gradient never reaches the optimizer -------------------------


def _state(model: Any) -> Any:
    from verigym.train._update import UpdateState
    from verigym.train.optim import make_scheduler

    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return UpdateState(opt, make_scheduler(opt, "constant", 0, 10), torch.Generator().manual_seed(0))


@pytest.mark.parametrize("poison", ["weight", "advantage"])
def test_a_non_finite_loss_or_gradient_skips_the_step_untouched(poison: str) -> None:
    from verigym.policies.tiny import build_model, build_tokenizer
    from verigym.train._update import policy_update
    from verigym.train.samples import Row

    model = build_model("tiny", build_tokenizer(), seed=0)
    advantage = NAN if poison == "advantage" else 1.0
    if poison == "weight":
        with torch.no_grad():
            next(model.parameters())[17, 0] = NAN  # the embedding of a token the row reads
    before = {k: v.clone() for k, v in model.state_dict().items()}
    state = _state(model)
    row = Row(
        ids=[5, 17, 11, 82, 10, 11, 12, 2], mask=[0, 0, 0, 0, 1, 1, 1, 1], logprobs=None, advantage=advantage
    )
    metrics = policy_update(
        model, [row], build_config({"rl": {"kl_beta": 0.0}}).rl, state, pad_id=0, temperature=1.0, max_len=8
    )
    assert metrics["optimizer_steps"] == 0 and metrics["skipped_optimizer_steps"] == 1
    assert "non-finite" in metrics["skip_reason"]
    assert state.optimizer.state_dict()["state"] == {}  # AdamW never stepped: no moments, no step count
    assert state.scheduler.last_epoch == 0
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k]) or (v.isnan() == before[k].isnan()).all(), k
    assert all(p.grad is None for p in model.parameters())
    assert all(math.isfinite(v) for v in metrics.values() if isinstance(v, float))


def test_a_checkpoint_with_a_non_finite_tensor_is_never_written(tmp_path: Path) -> None:
    from verigym.policies.tiny import build_model, build_tokenizer
    from verigym.train.checkpoint import TrainingHalted, save_checkpoint

    tok = build_tokenizer()
    model = build_model("tiny", tok, seed=0)
    with torch.no_grad():
        next(model.parameters())[1, 2] = INF
    state = _state(model)
    with pytest.raises(TrainingHalted, match="non-finite weights"):
        save_checkpoint(
            tmp_path, 1, model=model, tokenizer=tok, optimizer=state.optimizer,
            scheduler=state.scheduler, trainer_state={},
        )  # fmt: skip
    assert not (tmp_path / "checkpoints").exists() or not any((tmp_path / "checkpoints").iterdir())


CONFIG = """
seed = 1
out_dir = "{out}"

[[envs]]
name = "{env}"
args = {{ level = 1, size = 50 }}

[sampling]
max_tokens = 4

[rl]
preset = "grpo"
steps = {steps}
groups_per_step = 2
group_size = 2
lr = {lr}

[eval]
tasks = 2

[logging]
report = false
checkpoint_every = 1
"""


def _train(tmp_path: Path, *, env: str = "arithmetic", lr: float = 1e-3, steps: int = 2) -> tuple[Any, Path]:
    cfg = tmp_path / "c.toml"
    out = tmp_path / "run"
    cfg.write_text(CONFIG.format(out=out, env=env, lr=lr, steps=steps))
    return runner.invoke(app, ["train", str(cfg), "--threads", "1"]), out


def test_a_diverging_run_stops_after_max_skipped_steps_with_finite_checkpoints(tmp_path: Path) -> None:
    result, run = _train(tmp_path, lr=1e30, steps=8)  # finite, within float32: the weights blow up
    assert result.exit_code == 2, result.output
    text = _one(result)
    assert "3 steps in a row skipped" in text and "rl.max_skipped_steps = 3" in text
    assert "update skipped (non-finite" in text
    for weights in (run / "checkpoints").rglob("*.safetensors"):
        assert all(torch.isfinite(t).all() for t in load_file(weights).values()), weights
    assert not (run / "checkpoint").exists()  # no final model
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]  # valid JSON
    assert sum("skip_reason" in r for r in rows) == 3


def test_a_train_run_where_every_sample_errored_exits_non_zero_with_the_reason(tmp_path: Path) -> None:
    result, run = _train(tmp_path, env=f"{ENVS}:ExitEnv")
    assert result.exit_code == 2, result.output
    text = _one(result)
    assert "no step of 2 updated the model: all 8 samples errored (first: environment: SystemExit(3)" in text
    assert not (run / "checkpoint").exists()


def test_held_out_pass_at_1_is_none_when_nothing_was_scored() -> None:
    from verigym.policies.scripted import ScriptedPolicy
    from verigym.train._model import evaluate
    from verigym.types import Sampling

    env = _load_env("ExitEnv")
    tasks = env.tasks(3, split="test")
    res = asyncio.run(evaluate(env, ScriptedPolicy(lambda m: "1"), tasks, sampling=Sampling(max_tokens=4)))
    assert res["pass_at_1"] is None and res["reward"] is None
    assert res["errors"] == 3 and "SystemExit(3)" in res["first_error"]


def _load_env(name: str) -> Any:
    from verigym.envs.registry import load_env

    return load_env(f"{ENVS}:{name}")
