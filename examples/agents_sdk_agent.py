"""An OpenAI Agents SDK agent (``openai-agents``), unmodified: its default Responses model, or its Chat
Completions model with ``chat_agent``. verigym's gateway speaks both dialects::

    verigym eval calc --model smollm2-135m-instruct --env-arg verbose=true --agent examples/agents_sdk_agent.py:agent
"""

from __future__ import annotations

from typing import Any

from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)

set_tracing_disabled(True)  # nothing leaves the machine


def _agent(task: Any, model: Any) -> tuple[Agent, str]:
    system = "\n".join(m["content"] for m in task.messages if m["role"] == "system")
    question = "\n".join(m["content"] for m in task.messages if m["role"] == "user")
    tools = [function_tool(fn) for fn in task.tools.values()]
    return Agent(name="solver", instructions=system or None, tools=tools, model=model), question


async def agent(task: Any, client: Any) -> str:
    """The SDK's default model class: the Responses API."""
    solver, question = _agent(task, OpenAIResponsesModel(model="policy", openai_client=client))
    result = await Runner.run(solver, question, max_turns=6)
    return str(result.final_output)


async def chat_agent(task: Any, client: Any) -> str:
    """The same agent on the SDK's Chat Completions model."""
    solver, question = _agent(task, OpenAIChatCompletionsModel(model="policy", openai_client=client))
    result = await Runner.run(solver, question, max_turns=6)
    return str(result.final_output)
