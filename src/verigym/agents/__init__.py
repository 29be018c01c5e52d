"""Train the agent you already have: an unmodified agent program (an openai-SDK loop, an OpenAI Agents
SDK agent, a LangGraph graph, a CLI that reads ``OPENAI_BASE_URL``) as the harness of any environment,
its model calls recorded token-exact by the run's gateway (``verigym.gateway``)::

    from verigym.agents import agent_env
    env = agent_env(load_env("calc"), agent="examples/openai_agent.py:agent")
    # or agent_cmd="python my_cli_agent.py"; then evaluate / train / synth with env as with any env

On the command line: ``--agent FILE.py:FUNC`` or ``--agent-cmd "CMD ARGS"`` on ``verigym eval``, ``train``,
``synth`` and ``check-env``; ``agent = ...`` / ``agent_cmd = ...`` in a config.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from verigym.agents._env import AgentProgramEnv, OnError
from verigym.agents._program import AgentError, AgentProgram, AgentTask, load_program
from verigym.agents._trace import CallLabel, label_calls
from verigym.envs.base import Environment

__all__ = [
    "AgentError",
    "AgentProgram",
    "AgentProgramEnv",
    "AgentTask",
    "CallLabel",
    "agent_env",
    "label_calls",
    "load_program",
]


def agent_env(
    base: Environment,
    agent: str | Callable[..., Any] | None = None,
    agent_cmd: str | None = None,
    *,
    timeout_s: float = 300.0,
    on_error: OnError = "error",
) -> AgentProgramEnv:
    """``base`` harnessed by the program ``agent`` (``FILE.py:FUNC``, ``module:FUNC`` or a callable) or
    the command ``agent_cmd``; ``ValueError`` with one line when the program cannot be found."""
    return AgentProgramEnv(base, load_program(agent, agent_cmd), timeout_s=timeout_s, on_error=on_error)
