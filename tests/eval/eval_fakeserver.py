"""The eval tests' fake OpenAI server: ``verigym.testing.FakeOpenAIServer`` (uvicorn on 127.0.0.1)
whose model answers "What is A + B?" with A+B, or A+B+1 when the request's seed is divisible by 5.

``FakeServer(plan, ...)`` takes the same options; see ``verigym.testing`` for the faults a plan
may return ("500", "429", "400", "slow", "trunc", "badargs", "empty", ...).
"""

from __future__ import annotations

from typing import Any

from verigym.testing import FakeOpenAIServer, Plan, add_two_numbers

__all__ = ["FakeServer"]


class FakeServer(FakeOpenAIServer):
    def __init__(self, plan: Plan | None = None, **options: Any) -> None:
        super().__init__(plan, answer=add_two_numbers, **options)
