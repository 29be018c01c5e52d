"""The files ``verigym init NAME`` writes: a pip-installable third-party environment package, or with
``--agent`` a package around an agent program (``AGENT_TEMPLATES``).

Placeholders: ``{name}`` (the environment name), ``{package}`` (its import name), ``{cls}``
(the environment class). Braces meant literally are doubled.
"""

from __future__ import annotations

__all__ = ["AGENT_TEMPLATES", "TEMPLATES"]

PYPROJECT = """[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "0.1.0"
description = "A verigym environment: {name}."
requires-python = ">=3.10"
dependencies = ["verigym"]

[project.optional-dependencies]
test = ["pytest"]

# verigym finds the environment through this entry point (a module that registers it, imported the
# first time verigym misses a name): `verigym eval {name}` once installed.
[project.entry-points."verigym.plugins"]
{name} = "{package}.plugin"

[tool.setuptools.packages.find]
where = ["src"]
"""

ENV = '''"""The ``{name}`` environment: reverse a word (a template to replace with your own task).

Task: a seeded random word; the model must answer it reversed. Harness: single turn.
Grader: ``correct`` (exact match of the last line, whitespace-trimmed). Difficulty:
``length`` (letters per word). Tasks: ``ProceduralEnv`` draws ``size`` of them from ``generate``
(seeded; train and test never share a prompt). Oracle: answers the reversed word; null: answers
nothing.
"""

from __future__ import annotations

import random
import string

from verigym.envs.base import SingleTurnEnv
from verigym.envs.procedural import ProceduralEnv
from verigym.envs.registry import EnvArgError
from verigym.policies.base import Policy
from verigym.policies.scripted import ScriptedPolicy
from verigym.rubric import Grader, Rubric
from verigym.types import Grade, Message, Task, Trajectory

__all__ = ["{cls}"]


def correct(task: Task, trajectory: Trajectory) -> Grade:
    lines = [line.strip() for line in trajectory.final_text.strip().splitlines() if line.strip()]
    got = lines[-1] if lines else ""
    return Grade(score=float(got == task.answer), detail=f"expected {{task.answer!r}}, got {{got[:40]!r}}")


class {cls}(ProceduralEnv, SingleTurnEnv):
    """Reverse a word (replace with your task)."""

    name = "{name}"
    description = "Reverse a random word; exact match."

    def __init__(self, length: int = 6, size: int = 1000) -> None:
        if not isinstance(length, int) or not 2 <= length <= 40:
            raise EnvArgError(f"{name}: length must be an integer from 2 to 40, got {{length!r}}")
        self.length = length
        self.size = size
        super().__init__(rubric=Rubric([Grader(correct, name="correct")]))

    @property
    def task_name(self) -> str:  # part of every task's seed and id
        return "{name}-l{{}}".format(self.length)

    def generate(self, rng: random.Random) -> Task:
        word = "".join(rng.choice(string.ascii_lowercase) for _ in range(self.length))
        text = f"Reverse the word {{word}}. Answer with the reversed word only."
        return Task(id="", prompt=(Message(role="user", content=text),), answer=word[::-1])

    def oracle_policy(self) -> Policy:
        def solve(messages: list[Message]) -> str:
            word = messages[-1].content.split("Reverse the word ")[1].split(".")[0]
            return word[::-1]

        return ScriptedPolicy(solve, name="{name}-oracle")

    def null_policy(self) -> Policy:
        return ScriptedPolicy(lambda messages: "", name="{name}-null")
'''

TEST = '''"""The environment passes verigym's conformance check (oracle ≥ 0.99, null ≤ 0.05)."""

from verigym.envs.check import check_env

from {package}.env import {cls}


def test_{package}_passes_check_env() -> None:
    report = check_env({cls}(), n=16)
    assert report.ok, [f"{{r.name}}: {{r.detail}}" for r in report.failures]
'''

README = """# {name}

A [verigym](https://github.com/) environment.

```bash
pip install -e .            # registers the `verigym.plugins` entry point `{name}`
verigym envs                # lists {name}
verigym check-env {name}    # oracle ≥ 0.99, null ≤ 0.05, no hidden info leaks
verigym eval {name} --base-url http://localhost:8000/v1 --model MODEL -n 50
pytest                      # runs the same check
```

Edit `src/{package}/env.py`: generate tasks in `generate`, grade them in `correct`, keep
`oracle_policy()` able to solve every task and `null_policy()` scoring ~0, so a broken
verifier cannot hide.
"""

PLUGIN = '''"""What this package adds to verigym (its ``verigym.plugins`` entry point names this module)."""

from verigym.envs.registry import register_env

register_env("{name}", "{package}.env:{cls}", "Reverse a random word; exact match.")
'''

TEMPLATES: dict[str, str] = {
    "pyproject.toml": PYPROJECT,
    "src/{package}/__init__.py": '"""The {name} verigym environment."""\n',
    "src/{package}/env.py": ENV,
    "src/{package}/plugin.py": PLUGIN,
    "tests/test_{package}_env.py": TEST,
    "README.md": README,
}


AGENT_PYPROJECT = """[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "{name}"
version = "0.1.0"
description = "An agent program verigym evaluates and trains as it is: {name}."
requires-python = ">=3.10"
dependencies = ["openai"]

[project.optional-dependencies]
test = ["pytest", "verigym"]

[tool.setuptools.packages.find]
where = ["src"]
"""

AGENT = '''"""The ``{name}`` agent: an ordinary tool-calling loop on the official ``openai`` SDK.

verigym runs it unmodified (``--agent {package}.agent:agent``): ``task`` holds the prompt messages, the
tool schemas and the environment's tools; ``client`` is an ``openai.AsyncOpenAI`` pointed at the run's
recording gateway. Replace the loop with your own; keep the signature.
"""

from __future__ import annotations

from typing import Any

MAX_STEPS = 6


async def agent(task: Any, client: Any) -> str:
    messages: list[dict[str, Any]] = list(task.messages)
    for _ in range(MAX_STEPS):
        reply = await client.chat.completions.create(model="policy", messages=messages, tools=task.tool_schemas)
        message = reply.choices[0].message
        messages.append(message.model_dump(include={{"role", "content", "tool_calls"}}, exclude_none=True))
        if not message.tool_calls:
            return str(message.content or "")
        for call in message.tool_calls:
            result = await task.call_tool(call.function.name, call.function.arguments)
            messages.append({{"role": "tool", "tool_call_id": call.id, "content": result}})
    return ""
'''

AGENT_TEST = '''"""The agent solves ``calc`` when its model does: driven by the environment's oracle through verigym's
gateway, every task scores 1 (the loop, the tool calls and the answer all work)."""

import asyncio

from verigym.agents import agent_env
from verigym.envs.registry import load_env
from verigym.types import Sampling

from {package}.agent import agent


def test_{package}_solves_calc_with_the_oracle() -> None:
    env = agent_env(load_env("calc"), agent)
    oracle = env.oracle_policy()

    async def scores() -> list[float | None]:
        try:
            out = []
            for task in env.tasks(4, seed=0):
                trajectory = await env.rollout(task, oracle, Sampling(temperature=0.0))
                out.append((await env.rubric.score(task, trajectory)).reward)
            return out
        finally:
            env.close()

    assert asyncio.run(scores()) == [1.0] * 4
'''

AGENT_README = """# {name}

An agent program that [verigym](https://github.com/) evaluates, turns into SFT data and trains with RL
as it is: its model calls go through verigym's recording gateway, token-exact.

```bash
pip install -e .
verigym eval calc --model smollm2-135m-instruct --env-arg verbose=true --agent {package}.agent:agent
verigym synth calc --teacher oracle --agent {package}.agent:agent --out runs/demos
verigym train CONFIG.toml --agent {package}.agent:agent
pytest                      # the agent solves calc driven by the oracle
```

Edit `src/{package}/agent.py`; keep `agent(task, client)`.
"""

AGENT_TEMPLATES: dict[str, str] = {
    "pyproject.toml": AGENT_PYPROJECT,
    "src/{package}/__init__.py": '"""The {name} agent program."""\n',
    "src/{package}/agent.py": AGENT,
    "tests/test_{package}_agent.py": AGENT_TEST,
    "README.md": AGENT_README,
}
