"""An ordinary tool-calling agent loop on the official ``openai`` SDK, nothing verigym-specific in it.

Run it as the harness of any environment with tools; verigym hands it the task and a client pointed at
the run's recording gateway, and trains on what it did::

    verigym eval calc --model smollm2-135m-instruct --env-arg verbose=true --agent examples/openai_agent.py:agent
"""

from __future__ import annotations

from typing import Any

MAX_STEPS = 6


async def agent(task: Any, client: Any) -> str:
    """Ask the model, run the tools it calls, send the results back, until it answers without a call."""
    messages: list[dict[str, Any]] = list(task.messages)
    for _ in range(MAX_STEPS):
        reply = await client.chat.completions.create(
            model="policy", messages=messages, tools=task.tool_schemas
        )
        message = reply.choices[0].message
        messages.append(message.model_dump(include={"role", "content", "tool_calls"}, exclude_none=True))
        if not message.tool_calls:
            return str(message.content or "")
        for call in message.tool_calls:
            result = await task.call_tool(call.function.name, call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
    return ""
