"""The rollout engine: bounded concurrency, per-sample seeds, skip, group scoring, errors."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest
from eval_envs import AddEnv

from verigym.policies.scripted import ScriptedPolicy
from verigym.runner import rollout_group, run_rollouts, sample_seed
from verigym.types import Completion, Message, Record, Sampling


class CountingPolicy:
    """Answers correctly after a short sleep; records the most calls in flight and the seeds seen."""

    name = "counting"

    def __init__(self) -> None:
        self.live = 0
        self.peak = 0
        self.seeds: list[int | None] = []

    async def complete(
        self, messages: Sequence[Message], *, tools: object = None, sampling: Sampling
    ) -> Completion:
        self.live += 1
        self.peak = max(self.peak, self.live)
        self.seeds.append(sampling.seed)
        try:
            await asyncio.sleep(0.002)
        finally:  # a cancelled call is no longer in flight either
            self.live -= 1
        a, b = (int(x) for x in messages[-1].content.removeprefix("What is ").rstrip("?").split(" + "))
        return Completion(text=str(a + b))


def test_sample_seed_is_stable_and_distinct() -> None:
    assert sample_seed(None, "t", 0) is None
    assert sample_seed(3, "t", 0) == sample_seed(3, "t", 0)
    seeds = {sample_seed(3, f"t{i}", j) for i in range(50) for j in range(4)}
    assert len(seeds) == 200 and all(0 <= s < 2**31 for s in seeds if s is not None)
    assert sample_seed(3, "t", 0) != sample_seed(4, "t", 0)


async def test_concurrency_is_bounded_and_records_ordered() -> None:
    env, policy = AddEnv(), CountingPolicy()
    seen: list[Record] = []
    records = await run_rollouts(
        env,
        policy,
        env.tasks(10),
        samples_per_task=3,
        sampling=Sampling(seed=7),
        concurrency=4,
        on_record=seen.append,
        env_name="add",
        model_name="m",
    )
    assert policy.peak == 4 and len(records) == len(seen) == 30
    assert [(r.task_id, r.sample_index) for r in records] == [
        (f"add-0-{i}", j) for i in range(10) for j in range(3)
    ]
    assert all(r.score.reward == 1.0 and r.error is None for r in records)
    assert all(r.sampling.seed == sample_seed(7, r.task_id, r.sample_index) for r in records)
    assert records[0].trajectory.sample_index == 0 and records[2].trajectory.sample_index == 2


async def test_seeds_do_not_depend_on_concurrency_or_skip() -> None:
    env = AddEnv()
    a, b = CountingPolicy(), CountingPolicy()
    full = await run_rollouts(
        env,
        a,
        env.tasks(5),
        samples_per_task=2,
        sampling=Sampling(seed=1),
        concurrency=1,
        env_name="e",
        model_name="m",
    )
    skip = {("add-0-1", 0), ("add-0-3", 1)}
    part = await run_rollouts(
        env,
        b,
        env.tasks(5),
        samples_per_task=2,
        sampling=Sampling(seed=1),
        concurrency=8,
        skip=skip,
        env_name="e",
        model_name="m",
    )
    assert len(part) == 8 and not any((r.task_id, r.sample_index) in skip for r in part)
    by_key = {(r.task_id, r.sample_index): r.sampling.seed for r in full}
    assert all(by_key[(r.task_id, r.sample_index)] == r.sampling.seed for r in part)


async def test_group_graders_see_every_sample() -> None:
    env = AddEnv(group=True)
    replies = iter(["1", "22", "333", "4444"] * 10)
    policy = ScriptedPolicy(lambda messages: next(replies))
    records = await run_rollouts(
        env,
        policy,
        env.tasks(2),
        samples_per_task=4,
        sampling=Sampling(),
        concurrency=1,
        env_name="e",
        model_name="m",
    )
    for task in ("add-0-0", "add-0-1"):
        brevity = [r.score.grades["brevity"].score for r in records if r.task_id == task]
        assert brevity == [1.0, 0.0, 0.0, 0.0]
    scored = await rollout_group(
        env,
        ScriptedPolicy(lambda m: "5"),
        env.tasks(1)[0],
        samples=3,
        sampling=Sampling(seed=2),
        first_index=4,
    )
    assert [s.trajectory.sample_index for s in scored] == [4, 5, 6]
    trajectory, score = scored[0]
    assert score.grades["brevity"].score == 1.0 and trajectory.task_id == "add-0-0"


async def test_failures_are_errors_not_zeros() -> None:
    def flaky(messages: Sequence[Message]) -> str:
        if "+" in messages[-1].content and messages[-1].content.startswith("What is 4"):
            raise RuntimeError("boom")
        return "0"

    env = AddEnv(crash=True)
    records = await run_rollouts(
        env,
        ScriptedPolicy(flaky),
        env.tasks(20),
        samples_per_task=1,
        sampling=Sampling(),
        concurrency=3,
        env_name="e",
        model_name="m",
    )
    assert all(r.error is not None and r.score.reward is None for r in records)
    kinds = {r.error.kind for r in records if r.error}
    assert "grader" in kinds
    assert all("crashes" in r.error.message for r in records if r.error and r.error.kind == "grader")


async def test_environment_that_raises_is_recorded() -> None:
    class Broken(AddEnv):
        async def rollout(self, task, policy, sampling):  # type: ignore[no-untyped-def]
            raise OSError("disk gone")

    env = Broken()
    records = await run_rollouts(
        env,
        CountingPolicy(),
        env.tasks(2),
        samples_per_task=2,
        sampling=Sampling(),
        concurrency=2,
        env_name="e",
        model_name="m",
    )
    assert all(
        r.error is not None and r.error.kind == "environment" and "disk gone" in r.error.message
        for r in records
    )
    assert [r.sample_index for r in records] == [0, 1, 0, 1]


async def test_callback_failure_cancels_the_rest() -> None:
    env, policy = AddEnv(), CountingPolicy()

    def explode(record: Record) -> None:
        raise OSError("no space left")

    with pytest.raises(OSError, match="no space"):
        await run_rollouts(
            env,
            policy,
            env.tasks(50),
            samples_per_task=1,
            sampling=Sampling(),
            concurrency=4,
            on_record=explode,
            env_name="e",
            model_name="m",
        )
    # every rollout was cancelled and awaited before the error came out (none left running, however
    # far each had got), and none starts afterwards
    assert policy.live == 0
    started = len(policy.seeds)
    await asyncio.sleep(0.01)
    assert len(policy.seeds) == started < 20


async def test_invalid_tool_call_json_is_answered_by_the_tool_env() -> None:
    from eval_envs import AddToolEnv
    from eval_fakeserver import FakeServer

    from verigym.policies.openai import OpenAIPolicy

    env = AddToolEnv()
    with FakeServer(lambda body, attempt: "badargs" if len(body["messages"]) == 1 else None) as srv:  # type: ignore[arg-type]
        policy = OpenAIPolicy("m", [srv.url])
        records = await run_rollouts(
            env,
            policy,
            env.tasks(4),
            samples_per_task=1,
            sampling=Sampling(seed=1),
            concurrency=4,
            env_name="t",
            model_name="m",
        )
        await policy.aclose()
    assert srv.requests[0]["tools"][0]["function"]["name"] == "add"
    for r in records:
        assert r.error is None and r.score.reward is not None
        tool_msgs = [m for m in r.trajectory.messages if m.role == "tool"]
        assert len(tool_msgs) == 1 and "JSON" in tool_msgs[0].content
        assert r.trajectory.messages[1].tool_calls[0].arguments == '{"a": 1,'


def test_tuned_gc_is_restored() -> None:
    import gc

    from verigym.runner import tuned_gc

    before = gc.get_threshold()
    with tuned_gc(young=12_345):
        assert gc.get_threshold()[0] == 12_345 and gc.get_freeze_count() > 0
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


async def test_records_can_be_streamed_without_keeping_them() -> None:
    env, seen = AddEnv(), []
    out = await run_rollouts(
        env, CountingPolicy(), env.tasks(3), samples_per_task=2, sampling=Sampling(), concurrency=2,
        on_record=seen.append, env_name="e", model_name="m", keep_records=False,
    )  # fmt: skip
    assert out == [] and len(seen) == 6
