"""Exploration in training groups: task variants recorded on every sample, parameter noise that
changes sampling and leaves the weights as they were, and the knobs from a config and the CLI."""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from verigym.cli import app
from verigym.envs.builtin.arithmetic import ArithmeticEnv
from verigym.envs.builtin.shop import ShopEnv
from verigym.policies.local import LocalPolicy
from verigym.policies.scripted import ScriptedPolicy
from verigym.policies.tiny import build_model, build_tokenizer
from verigym.train._produce import EnvSlot, Producer
from verigym.train.config import ConfigError, build_config
from verigym.train.exploration import guided, parameter_noise, policy_rewrite, rule_rewrite
from verigym.train.group_filters import DifficultyTracker
from verigym.train.rewards import assign_advantages
from verigym.types import Completion, Message, Sampling, Task

torch.set_num_threads(1)


def _task(text: str) -> Task:
    return Task(id="t1", prompt=(Message(role="user", content=text),), answer="46", info={"k": 1})


def test_rule_rewrite_commutes_a_sum_and_keeps_answer_and_info() -> None:
    rng = random.Random(0)
    out = rule_rewrite(_task("12+34="), rng)
    assert out is not None and out.prompt[0].content == "34+12=" and out.answer == "46"
    assert out.id == "t1" and out.info["k"] == 1 and out.info["provenance"]["method"] == "rewrite"
    spaced = rule_rewrite(_task("Compute 3 * 4 * 5 now."), rng)
    assert spaced is not None and spaced.prompt[0].content != "Compute 3 * 4 * 5 now."
    assert sorted(spaced.prompt[0].content.split(" * ")[1:2]) != [] and "* " in spaced.prompt[0].content
    assert rule_rewrite(_task("12-34="), rng) is None  # not commutative: no rewrite
    assert rule_rewrite(_task("7+7="), rng) is None  # nothing to reorder
    g = guided(_task("12+34="), "Think twice.")
    assert g.prompt[0].content == "Think twice.\n\n12+34=" and g.info["provenance"]["guide"] == "Think twice."


def test_policy_rewrite_keeps_a_paraphrase_only_when_every_number_survives() -> None:
    task = _task("Ann has 12 apples and buys 34 more. How many now?")
    sampling = Sampling(max_tokens=64)
    good = ScriptedPolicy(lambda m: "After buying 34 more apples, Ann, who had 12, has how many?", name="w")
    out = asyncio.run(policy_rewrite(task, good, sampling))
    assert out is not None and out.prompt[0].content.startswith("After buying 34")
    assert out.info["provenance"] == {
        "method": "rewrite",
        "parent": "t1",
        "rule": "paraphrase",
        "writer": "w",
    }
    asked: list[str] = []

    def lossy_writer(messages: Sequence[Message]) -> str:
        asked.append(messages[-1].content)
        return "Ann has some apples."

    lossy = ScriptedPolicy(lossy_writer)
    assert asyncio.run(policy_rewrite(task, lossy, sampling)) is None
    assert "Ann has 12 apples" in asked[0]  # the writer is shown the original text


def test_parameter_noise_changes_the_weights_inside_and_restores_them_bit_for_bit() -> None:
    tok = build_tokenizer()
    model = build_model("tiny", tok, seed=0)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with parameter_noise(model, 0.1, torch.Generator().manual_seed(1)):
        moved = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
        assert len(moved) >= len(before) // 2
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    with parameter_noise(model, 0.0, torch.Generator()):
        assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def _producer(raw: dict[str, Any], env: Any = None, policy: Any = None) -> Producer:
    env = env or ArithmeticEnv(level=1, size=40)
    if policy is None:
        tok = build_tokenizer()
        policy = LocalPolicy(build_model("tiny", tok, seed=0), tok)
    cfg = build_config({"sampling": {"max_tokens": 4}, **raw})
    return Producer(
        [EnvSlot("a", env, 1.0, env.tasks(None, split="train"))], policy, cfg, DifficultyTracker()
    )


def test_groups_are_filled_from_variants_and_every_sample_records_its_variant() -> None:
    raw = {"rl": {"groups_per_step": 3, "group_size": 8, "group_variants": {"rewrite": 3, "guide": 2}}}
    producer = _producer(raw)
    batch = asyncio.run(producer.produce(0))
    assert batch.groups and "frac_groups_flat" in batch.stats
    for group in batch.groups:
        plain_text = group.task.prompt[-1].content
        seen: dict[str, list[str]] = {}
        for s in group.samples:
            text = s.scored.trajectory.prompt[-1].content
            seen.setdefault(s.variant or "?", []).append(text)
        assert sorted((k, len(v)) for k, v in seen.items()) == [("guide", 2), ("plain", 3), ("rewrite", 3)]
        a, b = plain_text.rstrip("=").split("+")
        assert set(seen["rewrite"]) == {f"{b}+{a}="} and set(seen["plain"]) == {plain_text}
        assert all(t.endswith(plain_text) and t != plain_text for t in seen["guide"])
    rows, metrics = assign_advantages(batch, producer.cfg, generator=torch.Generator())
    assert {r.meta["variant"] for r in rows} == {"plain", "rewrite", "guide"}
    assert {"variant/plain/pass_rate", "variant/rewrite/samples", "variant/guide/pass_rate"} <= set(metrics)
    assert metrics["variant/rewrite/samples"] == 3 * len(batch.groups)


def test_tool_variants_offer_renamed_tools_to_part_of_the_group() -> None:
    offered: list[tuple[str, ...]] = []

    async def agent(messages: Sequence[Message], *, tools: Any = None, sampling: Sampling) -> Completion:
        offered.append(tuple(sorted(t["function"]["name"] for t in tools or ())))
        return Completion(text="Sorry.")

    policy = ScriptedPolicy(lambda m: "Sorry.")
    policy.complete = agent  # type: ignore[method-assign]
    env = ShopEnv(level=1, size=20)
    raw = {
        "rl": {
            "groups_per_step": 1,
            "group_size": 4,
            "group_variants": {"tool_variant": 2, "tool_seeds": [7]},
        }
    }
    producer = _producer(raw, env, policy)
    slot, task = producer.slots[0], producer.slots[0].tasks[0]
    scored = asyncio.run(producer._group(slot, task, Sampling(max_tokens=8), 0, 0))
    variants = [s.trajectory.state["group_variant"] for s in scored]
    assert variants == ["tool_variant", "tool_variant", "plain", "plain"]
    plain = tuple(sorted(t.name for t in env.tools))
    assert offered.count(plain) == 2 and len(set(offered)) == 2
    with pytest.raises(ConfigError, match="has no tools to vary"):
        _producer(raw)  # arithmetic has no tools


def test_parameter_noise_in_a_step_restores_weights_and_recomputes_old_logprobs() -> None:
    producer = _producer(
        {"rl": {"groups_per_step": 2, "group_size": 4, "param_noise": [[0, 0.2], [10, 0.0]]}}
    )
    model = producer.policy.model  # type: ignore[attr-defined]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    batch = asyncio.run(producer.produce(5))
    assert batch.stats["param_noise"] == pytest.approx(0.1)  # annealed halfway
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert all(r.logprobs is None for g in batch.groups for s in g.samples for r in s.rows)
    late = asyncio.run(producer.produce(10))
    assert "param_noise" not in late.stats  # annealed to 0: plain sampling


def test_config_errors_for_the_exploration_keys() -> None:
    with pytest.raises(ConfigError, match="group_variants ask for 9"):
        build_config({"rl": {"group_size": 8, "group_variants": {"rewrite": 5, "guide": 4}}})
    with pytest.raises(ConfigError, match=r"rl\.group_variants\.rewriter"):
        build_config({"rl": {"group_variants": {"rewriter": "gpt"}}})
    with pytest.raises(ConfigError, match="param_noise must be"):
        build_config({"rl": {"param_noise": -0.1}})


CONFIG = """
seed = 1
out_dir = "{out}"

[[envs]]
name = "arithmetic"
args = {{ level = 1, size = 40, graders = "digits" }}

[sampling]
max_tokens = 4

[rl]
preset = "dapo"
steps = 2
groups_per_step = 2
group_size = 4
ranking = "lexicographic"
ranking_priority = ["correct", "last_digit"]
param_noise = [[0, 0.05], [2, 0.0]]

[rl.group_variants]
rewrite = 1
guide = 1

[eval]
tasks = 4
"""


def test_train_cli_runs_ranking_variants_and_noise_from_a_config(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(CONFIG.format(out=tmp_path / "run"))
    result = CliRunner().invoke(app, ["train", str(cfg), "--threads", "1"])
    assert result.exit_code == 0, result.output
    steps = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert len(steps) == 2 and steps[0]["param_noise"] == pytest.approx(0.05)
    assert "frac_groups_flat" in steps[0] and "grader/last_digit" in steps[0]
    bad = cfg.read_text().replace('"last_digit"]', '"nope"]')
    cfg.write_text(bad)
    result = CliRunner().invoke(app, ["train", str(cfg), "--threads", "1"])
    assert result.exit_code == 2 and "rl.ranking_priority: unknown grader(s) ['nope']" in result.output
