"""``verigym.evaluate``: the eval run as a library call (what ``verigym eval`` itself calls).

It writes the same results log as the engine's own ``eval.run.evaluate`` given the same environment,
tasks and server (through the real client, retries, a permanent error, token ids and logprobs); it
reports progress as events; it takes an environment by name or instance, a ``ModelSpec``, a policy,
options as keywords; it runs from inside a running event loop (a notebook); and set-up problems are
one-line ``EvalSetupError``s.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from test_eval_log_format import answer, logprobs, masked_lines, plan

import verigym
from verigym.envs.builtin.arithmetic import ArithmeticEnv
from verigym.eval.config import ConfigError, EvalConfig
from verigym.eval.run import evaluate as run_eval
from verigym.eval.workflow import EvalEvent, EvalSetupError
from verigym.policies.openai import OpenAIPolicy
from verigym.testing import FakeOpenAIServer


def test_the_library_run_writes_the_engines_log_and_reports_its_steps(tmp_path: Path) -> None:
    config = EvalConfig(
        env="arithmetic", num_tasks=12, samples_per_task=2, concurrency=8, seed=3, max_tokens=32
    )
    env_args = {"level": 4, "graders": "digits"}
    events: list[EvalEvent] = []
    with FakeOpenAIServer(plan, answer=answer, shape=logprobs, vllm=True) as server:
        spec = verigym.ModelSpec(base_url=server.url, concurrency=8, max_retries=2)
        run = verigym.evaluate(
            "arithmetic", spec, config, env_args=env_args, out=tmp_path / "lib", on_event=events.append
        )

        async def engine() -> None:
            env = ArithmeticEnv(**env_args)  # type: ignore[arg-type]
            policy = OpenAIPolicy(run.config.model or "", [server.url], concurrency=8, max_retries=2)
            same = run.config.model_copy(update={"out": str(tmp_path / "engine")})
            await run_eval(env, policy, env.tasks(12, seed=3), same, out=tmp_path / "engine")
            await policy.aclose()

        asyncio.run(engine())
    assert masked_lines(run.results_file) == masked_lines(tmp_path / "engine" / "results.jsonl")
    assert len(masked_lines(run.results_file)) == 24 and run.written == 24 and run.skipped == 0
    assert run.config is not None and run.config.model == "fake-model"  # asked of the server
    assert run.config.env_args == env_args and run.config.base_url == [server.url]
    saved = json.loads(run.config_file.read_text())
    assert saved["config"]["model"] == "fake-model" and saved["policy"] == f"(server default) at {server.url}"
    assert json.loads(run.summary_file.read_text()) == run.summary and run.report_file.is_file()
    kinds = [e.kind for e in events]
    assert kinds[:4] == ["ready", "endpoint", "running", "start"] and kinds[4:] == ["record"] * 24
    assert events[1].message == f"fake-model at {server.url}" and (events[3].total, events[3].done) == (24, 0)


def test_options_as_keywords_an_env_instance_and_the_envs_own_policy(tmp_path: Path) -> None:
    events: list[EvalEvent] = []
    run = verigym.evaluate(
        "arithmetic", policy="oracle", num_tasks=3, seed=1, out=tmp_path / "o", on_event=events.append
    )
    assert run.summary["reward_mean"] == 1.0 and run.summary["n_samples"] == 3
    assert run.config is not None and run.config.policy == "oracle" and run.config.num_tasks == 3
    assert [e.kind for e in events][:4] == ["policy", "ready", "running", "start"]
    assert events[0].message == "arithmetic-oracle (the environment's oracle policy, no model)"
    env = ArithmeticEnv()
    given = verigym.evaluate(env, env.null_policy(), num_tasks=2, out=tmp_path / "n")
    assert (
        given.config is not None and given.config.env == "arithmetic" and given.summary["reward_mean"] == 0.0
    )
    with pytest.raises(ConfigError, match="already holds results"):
        verigym.evaluate(env, env.null_policy(), num_tasks=2, out=tmp_path / "n")
    again = verigym.evaluate(env, env.null_policy(), num_tasks=3, out=tmp_path / "n", resume=True)
    assert (again.skipped, again.written) == (2, 1)


def test_it_runs_inside_a_running_event_loop_like_a_notebook(tmp_path: Path) -> None:
    async def cell() -> verigym.eval.EvalResult:
        return verigym.evaluate("arithmetic", policy="oracle", num_tasks=2, out=tmp_path / "nb")

    assert asyncio.run(cell()).summary["n_scored"] == 2


def test_set_up_problems_are_one_line_errors_with_their_cause(tmp_path: Path) -> None:
    with pytest.raises(EvalSetupError, match="unknown environment 'no-such-env'"):
        verigym.evaluate("no-such-env", policy="oracle", out=tmp_path / "a")
    with pytest.raises(EvalSetupError, match="cannot load tasks: unknown split 'nope'") as split:
        verigym.evaluate("arithmetic", policy="oracle", split="nope", out=tmp_path / "b")
    assert isinstance(split.value.__cause__, ValueError)
    with pytest.raises(EvalSetupError, match="no such directory"):
        verigym.evaluate("arithmetic", str(tmp_path / "no" / "model"), out=tmp_path / "c")
    with pytest.raises(EvalSetupError, match="cannot reach"):
        verigym.evaluate(
            "arithmetic", verigym.ModelSpec(base_url="http://127.0.0.1:9/v1"), out=tmp_path / "d"
        )
    assert not (tmp_path / "d" / "results.jsonl").exists()
