"""The hardening tests' fake OpenAI server: ``verigym.testing.FakeOpenAIServer`` (uvicorn on
127.0.0.1) answering arithmetic prompts ("12+34=") exactly; ``shape(body, payload)`` may rewrite
each response (empty content, a string where an object belongs...)."""

from __future__ import annotations

from verigym.testing import FakeOpenAIServer, Shape, arithmetic_answer

__all__ = ["Fake"]


class Fake(FakeOpenAIServer):
    """``with Fake(shape) as f: f.url``; ``f.requests`` holds the request bodies."""

    def __init__(self, shape: Shape | None = None) -> None:
        super().__init__(answer=arithmetic_answer, shape=shape, models=("fake",))
