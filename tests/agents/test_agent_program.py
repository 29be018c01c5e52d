"""An unmodified agent program as an environment's harness (``verigym.agents``): the examples' openai-SDK
loop and a command run through the recording gateway with exact ids; crashing, hanging, silent and
failing programs are errors with their reason (never a 0); ``on_error="truncate"`` keeps the prefix;
branches (a sub-agent's call) are labelled and trained as rows of their own."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from verigym.agents import AgentTask, agent_env
from verigym.envs.registry import load_env
from verigym.policies.local import LocalPolicy
from verigym.train.samples import trajectory_sequences
from verigym.types import Sampling

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def policy(tiny_dir: Path) -> LocalPolicy:
    return LocalPolicy.from_pretrained(tiny_dir)


SAMPLING = Sampling(temperature=1.0, max_tokens=24, seed=7)


def _roll(env: Any, policy: LocalPolicy, n: int = 2) -> list[Any]:
    async def go() -> list[Any]:
        try:
            return [await env.rollout(t, policy, SAMPLING) for t in env.tasks(n, seed=0)]
        finally:
            env.close()

    return asyncio.run(go())


def test_the_openai_example_is_recorded_with_the_ids_the_policy_sampled(policy: LocalPolicy) -> None:
    env = agent_env(load_env("calc"), str(EXAMPLES / "openai_agent.py") + ":agent")
    for traj in _roll(env, policy):
        assert traj.error is None, traj.error
        calls = traj.state["calls"]
        assert calls and calls[0]["kind"] == "root" and traj.state["gateway"]["calls"] == len(calls)
        for c in traj.completions:
            assert c.token_ids_exact and c.prompt_token_ids and c.completion_token_ids is not None
        # the first call sampled again directly, with the session's seed (sampling.seed + call index)
        first = traj.completions[0]
        spec = policy.spec(list(first.prompt_token_ids or ()), SAMPLING, seed=7)
        again = policy.run([spec])[0]
        assert tuple(again.token_ids) == first.completion_token_ids
        assert trajectory_sequences(traj)  # trainable


def test_a_command_agent_is_run_with_the_session_in_its_environment(policy: LocalPolicy) -> None:
    env = agent_env(load_env("calc"), agent_cmd=f"{sys.executable} {EXAMPLES / 'cli_agent.py'}")
    for traj in _roll(env, policy):
        assert traj.error is None, traj.error
        assert traj.state["gateway"]["calls"] >= 1


async def crash(task: AgentTask, client: Any) -> str:
    await client.chat.completions.create(model="m", messages=task.messages, max_tokens=2)
    raise RuntimeError("the agent fell over")


async def hang(task: AgentTask, client: Any) -> str:
    await asyncio.sleep(60)
    return "never"


async def silent(task: AgentTask, client: Any) -> str:
    return "12"


@pytest.mark.parametrize(
    ("program", "kind", "says"),
    [
        (crash, "agent_crash", "the agent fell over"),
        (hang, "agent_timeout", "limit"),
        (silent, "agent_silent", "never called the model"),
    ],
)
def test_a_failed_program_is_an_error_with_its_reason(
    policy: LocalPolicy, program: Any, kind: str, says: str
) -> None:
    env = agent_env(load_env("calc"), program, timeout_s=2.0)
    traj = _roll(env, policy, n=1)[0]
    assert traj.stop_reason == "error" and traj.error is not None
    assert traj.error.kind == kind and says in traj.error.message


def test_a_failing_command_reports_its_exit_code_and_stderr(policy: LocalPolicy) -> None:
    script = "import sys; sys.stderr.write('no api here\\n'); sys.exit(3)"
    env = agent_env(load_env("calc"), agent_cmd=f'{sys.executable} -c "{script}"')
    traj = _roll(env, policy, n=1)[0]
    assert traj.error is not None and traj.error.kind == "agent_exit"
    assert "exited with 3" in traj.error.message and "no api here" in traj.error.message


def test_truncate_keeps_the_calls_of_a_crashed_program(policy: LocalPolicy) -> None:
    env = agent_env(load_env("calc"), crash, on_error="truncate")
    traj = _roll(env, policy, n=1)[0]
    assert traj.stop_reason == "truncated" and traj.error is None
    assert traj.state["agent_error"]["kind"] == "agent_crash"
    assert len(traj.completions) == 1 and trajectory_sequences(traj)


async def with_sub_agent(task: AgentTask, client: Any) -> str:
    """The main conversation, a sub-agent's call with its own system prompt, then the main one again."""
    messages = list(task.messages)
    first = await client.chat.completions.create(model="m", messages=messages, max_tokens=4)
    messages.append({"role": "assistant", "content": first.choices[0].message.content or ""})
    sub = [{"role": "system", "content": "You summarise."}, {"role": "user", "content": "summarise 12"}]
    await client.chat.completions.create(model="m", messages=sub, max_tokens=4)
    messages.append({"role": "user", "content": "go on"})
    last = await client.chat.completions.create(model="m", messages=messages, max_tokens=4)
    return str(last.choices[0].message.content or "")


def test_a_sub_agent_call_is_a_labelled_branch_and_a_row_of_its_own(policy: LocalPolicy) -> None:
    env = agent_env(load_env("arithmetic"), with_sub_agent)
    traj = _roll(env, policy, n=1)[0]
    kinds = [(c["kind"], c["parent"]) for c in traj.state["calls"]]
    assert kinds == [("root", None), ("auxiliary", 0), ("continue", 0)]
    assert traj.state["gateway"] == {
        "calls": 3,
        "merged": 1,
        "branches": 1,
        "prefix_breaks": 0,
        "replayed": 0,
    }
    assert [t.source for t in traj.turns] == ["branch", "model", "env", "model"]
    rows = trajectory_sequences(traj)
    assert len(rows) == 2  # the main conversation merged into one row, the sub-agent's call another


def test_an_unknown_program_is_one_line() -> None:
    with pytest.raises(ValueError, match="no function nope"):
        agent_env(load_env("calc"), str(EXAMPLES / "openai_agent.py") + ":nope")
    with pytest.raises(ValueError, match=r"expected FILE\.py:FUNC"):
        agent_env(load_env("calc"), "just-a-name")


def test_the_oracle_answers_an_agent_program_through_the_gateway() -> None:
    """A policy that is not an in-process model (here calc's scripted oracle, which answers from the
    episode's task) is reached through the gateway's Chat Completions path: SFT data by `synth`."""
    env = agent_env(load_env("calc"), str(EXAMPLES / "openai_agent.py") + ":agent")
    oracle = env.oracle_policy()
    assert oracle is not None

    async def go() -> list[Any]:
        try:
            return [await env.rollout(t, oracle, SAMPLING) for t in env.tasks(3, seed=0)]
        finally:
            env.close()

    for task, traj in zip(env.tasks(3, seed=0), asyncio.run(go()), strict=True):
        assert traj.error is None, traj.error
        assert traj.final_text.strip() == task.answer
        assert asyncio.run(env.rubric.score(task, traj)).reward == 1.0


def test_init_agent_writes_a_package_whose_own_test_passes(tmp_path: Path) -> None:
    """`verigym init NAME --agent`: a pip-installable package around an agent program; its test (the
    agent solving calc driven by the oracle through the gateway) passes as written."""
    import importlib
    import runpy

    from verigym._cli.collection_cmd import write_package

    root = write_package("my-agent", tmp_path, agent=True)
    assert (root / "pyproject.toml").exists() and (root / "src/my_agent/agent.py").exists()
    sys.path.insert(0, str(root / "src"))
    try:
        importlib.invalidate_caches()
        namespace = runpy.run_path(str(root / "tests/test_my_agent_agent.py"))
        namespace["test_my_agent_solves_calc_with_the_oracle"]()
    finally:
        sys.path.remove(str(root / "src"))
        for name in [m for m in sys.modules if m == "my_agent" or m.startswith("my_agent.")]:
            del sys.modules[name]
