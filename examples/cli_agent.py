"""A command-line agent: it reads ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` like any OpenAI client and the
task as JSON on stdin, brings its own tool, and prints its answer::

    verigym eval calc --model smollm2-135m-instruct --env-arg verbose=true --agent-cmd "python examples/cli_agent.py"
"""

from __future__ import annotations

import json
import re
import sys

import openai


def calc(expr: str) -> str:
    if not re.fullmatch(r"\s*\d+(\s*[-+*]\s*\d+)*\s*", expr):
        return "Error: expr must be integers joined by + - *"
    return str(eval(expr, {"__builtins__": {}}))  # digits and + - * only, checked above


def main() -> None:
    task = json.load(sys.stdin)
    client = openai.OpenAI(max_retries=0)  # OPENAI_BASE_URL and OPENAI_API_KEY come from the environment
    messages = task["messages"]
    for _ in range(6):
        message = (
            client.chat.completions.create(model="policy", messages=messages, tools=task["tools"])
            .choices[0]
            .message
        )
        messages.append(message.model_dump(include={"role", "content", "tool_calls"}, exclude_none=True))
        if not message.tool_calls:
            print(message.content or "")
            return
        for call in message.tool_calls:
            args = json.loads(call.function.arguments or "{}")
            messages.append(
                {"role": "tool", "tool_call_id": call.id, "content": calc(str(args.get("expr", "")))}
            )
    print("")


if __name__ == "__main__":
    main()
