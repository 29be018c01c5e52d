"""UserSimEnv and the tools_user built-in: the goal is only in the simulated user's hands, the agent
must ask and act, and the grade comes from the final database state (tau-bench style)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from verigym.cli import app
from verigym.envs.builtin.shop_user import ASK, ShopUserEnv
from verigym.envs.check import check_env
from verigym.envs.registry import load_env
from verigym.envs.user_sim import STOP, PolicyUser, Reveal, ScriptedUser
from verigym.policies.base import Policy
from verigym.policies.scripted import Reply, ScriptedPolicy
from verigym.types import Message, Sampling, Score, Task, ToolCall, Trajectory

SAMPLING = Sampling(temperature=0.0, max_tokens=256)


def play(env: ShopUserEnv, task: Task, policy: Policy) -> tuple[Trajectory, Score]:
    async def go() -> tuple[Trajectory, Score]:
        trajectory = await env.rollout(task, policy, SAMPLING)
        return trajectory, await env.rubric.score(task, trajectory)

    return asyncio.run(go())


def a_write_task(env: ShopUserEnv) -> Task:
    return next(t for t in env.tasks(20, seed=1) if t.info["gold_actions"])


def test_tools_user_is_registered_and_passes_check_env() -> None:
    for level in (1, 2, 3):
        env = load_env("tools_user", level=level)
        assert isinstance(env, ShopUserEnv)
        report = check_env(env, n=6, seed=2)
        assert report.ok, report.failures
        assert {r.name: r.status for r in report.results}["oracle"] == "pass"
        assert {r.name: r.status for r in report.results}["null"] == "pass"


def test_the_goal_is_hidden_from_the_agent_and_revealed_by_the_user() -> None:
    env = ShopUserEnv(level=2)
    task = a_write_task(env)
    opening = task.prompt[-1].content
    user = task.info["user"]
    assert user["email"] not in opening and user["request"] not in opening
    trajectory, score = play(env, task, env.oracle_policy())
    said = [m.content for m in trajectory.messages if m.role == "user"]
    assert said[1].startswith(f"My email is {user['email']}.") and user["request"] in said[1]
    assert said[-1].endswith(STOP) and trajectory.stop_reason == "done"
    assert trajectory.state["user_stopped"] and "_task" not in trajectory.state
    assert score.reward == 1.0 and score.grades["final_state"].score == 1.0


def test_an_agent_that_never_acts_or_guesses_fails_on_final_state() -> None:
    env = ShopUserEnv(level=2)
    task = a_write_task(env)
    _, idle = play(env, task, env.null_policy())
    assert idle.reward == 0.0 and idle.grades["final_state"].score == 0.0

    gold = task.info["gold_actions"][0]
    facts = ", ".join(task.info["outputs"])

    def wrong_order(messages: Sequence[Message]) -> Reply:  # asks, then acts on another order
        if not any(m.role == "assistant" for m in messages):
            return ASK
        if not any(m.tool_calls for m in messages if m.role == "assistant"):
            args = dict(gold["arguments"])
            if "order_id" in args:
                args["order_id"] = "O0000"
            else:
                args["customer_id"] = "C000"
            return "", [ToolCall(id="w", name=gold["name"], arguments=json.dumps(args))]
        return f"All done. {facts}."

    _, wrong = play(env, task, ScriptedPolicy(wrong_order))
    # the facts were said, but the database is not the gold one: the gate keeps the reward at 0
    assert wrong.reward == 0.0 and wrong.grades["outputs"].detail == "gated"


def test_scripted_user_reveals_what_is_asked_then_volunteers_then_stops() -> None:
    task = Task(
        id="t",
        prompt=(Message(role="user", content="hi"),),
        info={
            "user": {
                "reveals": [
                    {"keywords": ["email"], "text": "a@b.c"},
                    {"keywords": ["order"], "text": "cancel O1"},
                ]
            }
        },
    )
    user = ScriptedUser()

    def reply(*agent: str) -> str:
        convo = [Message(role="user", content="hi")]
        for text in agent:
            convo += [Message(role="assistant", content=text), Message(role="user", content="...")]
        return asyncio.run(user.reply(task, convo[:-1]))

    assert reply("Which order?") == "cancel O1"  # asked for the second piece: only that one
    assert reply("Hello.") == "a@b.c"  # asked for nothing: the next piece, in order
    assert reply("Your email and order?") == "a@b.c cancel O1"
    assert reply("Your email and order?", "Anything else?") == "I have told you everything I know."
    assert reply("Your email and order?", "Done: O1 is cancelled.").endswith(STOP)
    custom = ScriptedUser(lambda t: [Reveal(("x",), "only x")])
    assert asyncio.run(custom.reply(task, [Message(role="assistant", content="x?")])) == "only x"


def test_a_policy_plays_the_user_with_roles_flipped_and_its_stop_ends_the_episode() -> None:
    seen: list[list[Message]] = []

    def customer(messages: Sequence[Message]) -> Reply:
        seen.append(list(messages))
        return STOP if len(seen) > 1 else "It is me, and I need my address changed."

    env = ShopUserEnv(level=1)
    env.user = PolicyUser(ScriptedPolicy(customer))
    task = env.tasks(1, seed=3)[0]
    agent = ScriptedPolicy(lambda m: "Who are you?" if len(m) < 4 else "Okay.")
    trajectory, _ = play(env, task, agent)
    first = seen[0]
    assert first[0].role == "system" and task.info["user"]["request"] in first[0].content
    assert [m.role for m in first[1:]] == ["assistant", "user"]  # the opening is the user's own line
    assert first[-1].content == "Who are you?"
    assert trajectory.stop_reason == "done" and trajectory.state["user_turns"] == 2
    # the hidden goal never reaches the agent
    agent_view = "\n".join(m.content for m in trajectory.messages if m.role != "user")
    assert task.info["user"]["request"] not in agent_view


def test_cli_check_env_runs_tools_user_and_rejects_a_bad_user() -> None:
    runner = CliRunner()
    ok = runner.invoke(app, ["check-env", "tools_user", "-n", "4"])
    assert ok.exit_code == 0, ok.output
    bad = runner.invoke(app, ["check-env", "tools_user", "--env-arg", "user=robot"])
    assert bad.exit_code == 2 and "user must be 'scripted' or 'policy'" in bad.output


def _chat_server(agent: Policy, customer: Policy) -> Any:
    """A real OpenAI-compatible chat server on 127.0.0.1: requests whose system prompt is the
    simulated user's are answered by ``customer``, the rest by ``agent``."""
    import uvicorn
    from fastapi import FastAPI

    app_ = FastAPI()

    @app_.post("/v1/chat/completions")
    async def chat(body: dict[str, Any]) -> dict[str, Any]:
        messages = [Message.model_validate(_from_openai(m)) for m in body["messages"]]
        who = customer if messages and messages[0].content.startswith("You are a customer") else agent
        done = await who.complete(messages, tools=body.get("tools"), sampling=SAMPLING)
        calls = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in done.tool_calls
        ]
        message = {"role": "assistant", "content": done.text, **({"tool_calls": calls} if calls else {})}
        return {
            "id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }  # fmt: skip

    server = uvicorn.Server(uvicorn.Config(app_, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    return server, thread, f"http://127.0.0.1:{port}/v1"


def _from_openai(m: dict[str, Any]) -> dict[str, Any]:
    calls = [
        {"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
        for c in m.get("tool_calls") or ()
    ]
    return {
        "role": m["role"],
        "content": m.get("content") or "",
        "tool_calls": calls,
        "tool_call_id": m.get("tool_call_id"),
        "name": m.get("name"),
    }


def test_cli_eval_tools_user_against_served_agent_and_served_user(tmp_path: Path) -> None:
    env = ShopUserEnv(level=2)
    env.tasks(4, seed=0)  # the oracle behind the server knows the tasks the eval will draw

    def customer(messages: Sequence[Message]) -> Reply:
        goal = messages[0].content.split("only you know:\n\n", 1)[1].split("\n\n", 1)[0]
        last = messages[-1].content
        return f"Thanks. {STOP}" if last.startswith("All done") else goal

    server, thread, url = _chat_server(env.oracle_policy(), ScriptedPolicy(customer))
    try:
        for extra in (
            [],
            [
                "--env-arg",
                "user=policy",
                "--env-arg",
                "user_model=customer",
                "--env-arg",
                f"user_base_url={url}",
            ],
        ):
            out = tmp_path / f"run{len(extra)}"
            args = ["eval", "tools_user", "--base-url", url, "--model", "agent", "-n", "4", "--out", str(out)]
            result = CliRunner().invoke(app, args + extra)
            assert result.exit_code == 0, result.output
            summary = json.loads((out / "summary.json").read_text())
            assert summary["pass_at_k"]["1"] == 1.0, summary
            record = json.loads((out / "results.jsonl").read_text().splitlines()[0])
            users = [
                m["content"]
                for m in record["trajectory"]["prompt"]
                + [mm for t in record["trajectory"]["turns"] for mm in t["messages"]]
                if m["role"] == "user"
            ]
            assert users[-1].endswith(STOP) and len(users) >= 3
    finally:
        server.should_exit = True
        thread.join(timeout=10)
