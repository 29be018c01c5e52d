"""Real agent frameworks, unmodified, as the harness of ``calc`` (issue 38 item 5): the examples' official
``openai`` SDK loop, the OpenAI Agents SDK on its default Responses model and on its Chat Completions
model, LangGraph's ``create_react_agent`` on ``langchain-openai``'s ``ChatOpenAI`` with bound tools, and a
command, each run through the run's recording gateway.

- With the tiny model at T = 1: no errors, and every recorded call's ids are exactly the ids the policy
  samples when run directly on the recorded prompt ids with the session's seed (``sampling.seed`` + the
  call's index).
- With a model that can do the task (the tiny model overfit to one ``calc`` episode, as the frameworks
  render it: the Agents SDK's strict ``function_tool`` schema, which the openai loop and the command also
  send, and LangChain's own schema for the same function), every framework completes the loop (call,
  result, answer) and the ``calc`` rubric scores it 1, as it scores verigym's own ``calc`` harness.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "serve"))

from calc_model import ANSWER, ARGS, INSTRUCTIONS, QUESTION, chat_tool, turn_messages

from verigym.agents import agent_env
from verigym.envs.base import Environment
from verigym.envs.builtin.calc import CalcEnv, calc
from verigym.envs.registry import load_env
from verigym.policies.local import LocalPolicy
from verigym.types import Message, Sampling, Task, Trajectory

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
PROGRAMS: dict[str, dict[str, str]] = {
    "openai_loop": {"agent": f"{EXAMPLES / 'openai_agent.py'}:agent"},
    "agents_sdk_responses": {"agent": f"{EXAMPLES / 'agents_sdk_agent.py'}:agent"},
    "agents_sdk_chat": {"agent": f"{EXAMPLES / 'agents_sdk_agent.py'}:chat_agent"},
    "langgraph": {"agent": f"{EXAMPLES / 'langgraph_agent.py'}:agent"},
    "command": {"agent_cmd": f"{sys.executable} {EXAMPLES / 'cli_agent.py'}"},
}


@pytest.fixture(scope="module")
def policy(tiny_dir: Path) -> LocalPolicy:
    return LocalPolicy.from_pretrained(tiny_dir, device="cpu")


def _langchain_tool() -> dict[str, Any]:
    """The schema LangChain's ``ChatOpenAI.bind_tools`` sends for ``tool(calc)``."""
    from langchain_core.tools import tool
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return convert_to_openai_tool(tool(calc))


@pytest.fixture(scope="module")
def calc_policy(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> LocalPolicy:
    """The tiny model overfit (greedy) to the two turns of ``417*823=`` under both tool schemas."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from verigym.policies.local.chat import encode_chat

    tok = AutoTokenizer.from_pretrained(tiny_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_dir)
    replies = [f'<tool_call>{{"name": "calc", "arguments": {ARGS}}}</tool_call>', ANSWER]
    pairs = []
    for schema in (chat_tool(), _langchain_tool()):
        for second, reply in zip((False, True), replies, strict=True):
            prompt = encode_chat(tok, turn_messages(second), [schema])
            pairs.append((prompt, tok(reply, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]))
    width = max(len(p) + len(t) for p, t in pairs)
    pad = [width - len(p) - len(t) for p, t in pairs]
    eos = tok.eos_token_id
    ids = torch.tensor([p + t + [eos] * k for (p, t), k in zip(pairs, pad, strict=True)])
    labels = torch.tensor([[-100] * len(p) + t + [-100] * k for (p, t), k in zip(pairs, pad, strict=True)])
    mask = torch.tensor([[1] * (len(p) + len(t)) + [0] * k for (p, t), k in zip(pairs, pad, strict=True)])

    def learned(logits: torch.Tensor) -> bool:  # every reply is the greedy one
        return all(
            logits[row, len(p) - 1 : len(p) + len(t) - 1].argmax(-1).tolist() == t
            for row, (p, t) in enumerate(pairs)
        )

    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(800):
        out = model(ids, attention_mask=mask, labels=labels)
        if out.loss.item() < 0.05 and learned(out.logits):  # a margin over the bare argmax
            break
        out.loss.backward()
        opt.step()
        opt.zero_grad()
    model.eval()
    with torch.no_grad():
        assert learned(model(ids, attention_mask=mask).logits), "the calc model did not learn its episode"
    out_dir = tmp_path_factory.mktemp("calc_frameworks") / "model"
    model.save_pretrained(out_dir)
    tok.save_pretrained(out_dir)
    return LocalPolicy.from_pretrained(out_dir, device="cpu")


class OneCalc(CalcEnv):
    """``calc`` on the one task the overfit model learned, with its system prompt and tool schema."""

    def __init__(self) -> None:
        super().__init__()
        self.system_prompt = INSTRUCTIONS

    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        return [Task(id="calc-417x823", prompt=(Message(role="user", content=QUESTION),), answer=ANSWER)]

    def tool_schemas(self) -> list[dict[str, Any]] | None:
        return [chat_tool()]


def _roll(env: Environment, policy: LocalPolicy, sampling: Sampling, n: int) -> list[Trajectory]:
    async def go() -> list[Trajectory]:
        try:
            return [await env.rollout(t, policy, sampling) for t in env.tasks(n, seed=0)]
        finally:
            close = getattr(env, "close", None)
            if close is not None:
                close()

    return asyncio.run(go())


def _assert_sampled_by_the_policy(traj: Trajectory, policy: LocalPolicy, sampling: Sampling) -> None:
    """Every recorded call is token-exact and is what the policy samples again from its prompt ids with
    the session's seed for that call (``sampling.seed`` + the call's index)."""
    calls = traj.state["calls"]
    assert traj.state["gateway"]["calls"] == len(calls) and traj.state["gateway"]["branches"] == 0
    completions = [t.completion for t in traj.turns if t.completion is not None]  # the calls, in order
    assert len(completions) == len(calls)
    for index, completion in enumerate(completions):
        assert completion.token_ids_exact and completion.constrained is None
        assert completion.prompt_token_ids and completion.completion_token_ids is not None
        assert sampling.seed is not None
        spec = policy.spec(list(completion.prompt_token_ids), sampling, seed=sampling.seed + index)
        again = policy.run([spec])[0]
        assert tuple(again.token_ids) == completion.completion_token_ids, f"call {index}"


# LangGraph 1.x points create_react_agent at langchain.agents.create_agent (the ``langchain`` package, not
# in the lock); the example uses the langgraph API the issue names
FILTER = pytest.mark.filterwarnings("ignore:create_react_agent has been moved")


@FILTER
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_a_framework_is_recorded_with_the_ids_the_policy_sampled(name: str, policy: LocalPolicy) -> None:
    sampling = Sampling(temperature=1.0, max_tokens=64, seed=7)  # the tiny model stops within 64
    env = agent_env(load_env("calc", verbose=True), **PROGRAMS[name])  # type: ignore[arg-type]
    for traj in _roll(env, policy, sampling, n=2):
        assert traj.error is None, traj.error
        assert traj.state["calls"][0]["kind"] == "root"
        _assert_sampled_by_the_policy(traj, policy, sampling)


@FILTER
@pytest.mark.parametrize("name", ["native", *PROGRAMS])
def test_a_framework_completes_calc_and_scores_as_the_native_harness(
    name: str, calc_policy: LocalPolicy
) -> None:
    sampling = Sampling(temperature=0.0, max_tokens=96, seed=3)
    env: Environment = OneCalc() if name == "native" else agent_env(OneCalc(), **PROGRAMS[name])  # type: ignore[arg-type]
    traj = _roll(env, calc_policy, sampling, n=1)[0]
    assert traj.error is None and traj.stop_reason == "done", (traj.error, traj.stop_reason)
    assert [t.source for t in traj.turns] == ["model", "env", "model"]
    first, last = traj.completions
    assert [c.name for c in first.tool_calls] == ["calc"] and last.text.strip() == ANSWER
    score = asyncio.run(env.rubric.score(env.tasks()[0], traj))
    assert score.grades["correct"].score == 1.0 and score.grades["tool_call_ok"].score == 1.0
    if name != "native":
        assert [c["kind"] for c in traj.state["calls"]] == ["root", "continue"]
        _assert_sampled_by_the_policy(traj, calc_policy, sampling)


def test_the_agents_sdk_responses_model_fails_on_a_reply_cut_at_max_tokens(policy: LocalPolicy) -> None:
    """The SDK raises on a Responses reply with ``status="incomplete"`` (as it does against OpenAI): the
    rollout is an error with the SDK's reason, never a 0, and the call it made is still recorded."""
    sampling = Sampling(temperature=1.0, max_tokens=8, seed=7)
    env = agent_env(load_env("calc", verbose=True), **PROGRAMS["agents_sdk_responses"])  # type: ignore[arg-type]
    traj = _roll(env, policy, sampling, n=1)[0]
    assert traj.error is not None and traj.error.kind == "agent_crash"
    assert "max_output_tokens" in traj.error.message
    assert [c.finish_reason for c in traj.completions] == ["length"]
    _assert_sampled_by_the_policy(traj, policy, sampling)
