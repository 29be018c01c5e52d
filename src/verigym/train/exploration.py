"""Exploration in training groups: fill a group from variants of its task, or sample with noisy weights.

A group whose samples all get the same reward teaches nothing (zero variance → zero advantage).
The seed lecture's remedies (003, "Effective policy exploration") are implemented here:

- **Prompt variants** — a group of G samples of one task is filled partly from variants of it:
  ``rewrite`` (the same problem in other words: ``rule_rewrite`` commutes the operands of a sum
  or product, which keeps the answer; ``policy`` asks the training policy to paraphrase with
  ``data.synthesis.REWRITE_PROMPTS`` and keeps the paraphrase only if every number survives),
  ``guide`` (a guiding sentence that pushes another approach, put before the task's text), and
  ``tool_variant`` (the environment's tools renamed, reworded, reordered, with distractors —
  ``tools.variants``; tool environments only). Every variant keeps the task's reference answer
  and hidden info, so the same rubric grades it. Each sample records its variant
  (``trajectory.state["group_variant"]``, ``row.meta["variant"]``) and the step metrics report
  pass rate per variant.
- **Parameter noise** — Plappert et al. 2018, "Parameter Space Noise for Exploration"
  (arXiv:1706.01905): before sampling a step, add Gaussian noise σ·std(W)·ε to every trainable
  tensor W (the LoRA factors when LoRA is on), sample, then restore the clean weights. σ follows
  a schedule (anneal it to 0). The update treats the noisy samples as exploration data for the
  clean policy: their sampling logprobs are dropped and recomputed under the clean weights, so
  the PPO ratio starts at 1.
"""

from __future__ import annotations

import contextlib
import random
import re
from collections.abc import Iterator, Sequence
from typing import Annotated, Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

from verigym.policies.base import Policy
from verigym.types import Message, Sampling, Task

__all__ = [
    "DEFAULT_GUIDES",
    "GroupVariantsConfig",
    "guided",
    "numbers_of",
    "parameter_noise",
    "policy_rewrite",
    "rule_rewrite",
]

DEFAULT_GUIDES: tuple[str, ...] = (
    "Solve this a different way than you usually would.",
    "Work step by step and check each step before the next.",
    "Start from what the answer must look like, then work backwards.",
    "First restate the problem in your own words, then solve it.",
)


class GroupVariantsConfig(BaseModel):
    """How many of a group's ``group_size`` samples see each variant of the task (the rest see it
    as is). ``rewriter``: ``rules`` (commute a sum's or product's operands) or ``policy`` (the
    training policy paraphrases; kept only when every number survives); ``guides``: the guiding
    sentences (one drawn per sample); ``tool_seeds``: tool-variant seeds to draw from (empty: a
    fresh seed per group)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    rewrite: Annotated[int, Field(ge=0)] = 0
    guide: Annotated[int, Field(ge=0)] = 0
    tool_variant: Annotated[int, Field(ge=0)] = 0
    rewriter: Literal["rules", "policy"] = "rules"
    guides: list[str] = list(DEFAULT_GUIDES)
    tool_seeds: list[int] = []

    @property
    def total(self) -> int:
        return self.rewrite + self.guide + self.tool_variant


_EXPR = re.compile(r"\d+(?:\s*[+*]\s*\d+)+")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _with_user_text(task: Task, text: str, method: str, **extra: Any) -> Task:
    """``task`` with its last user message replaced by ``text``; provenance recorded in info."""
    last = max(i for i, m in enumerate(task.prompt) if m.role == "user")
    prompt = tuple(Message(role="user", content=text) if i == last else m for i, m in enumerate(task.prompt))
    info = {**task.info, "provenance": {"method": method, "parent": task.id, **extra}}
    return task.model_copy(update={"prompt": prompt, "info": info})


def _user_text(task: Task) -> str:
    return next((m.content for m in reversed(task.prompt) if m.role == "user"), "")


def rule_rewrite(task: Task, rng: random.Random) -> Task | None:
    """Reorder the operands of the first pure sum or pure product in the task's text (the answer
    is unchanged); None when there is none or reordering cannot change it."""
    text = _user_text(task)
    match = _EXPR.search(text)
    if match is None:
        return None
    expr = match.group(0)
    ops = set(re.findall(r"[+*]", expr))
    if len(ops) != 1:
        return None
    op = ops.pop()
    operands = [t.strip() for t in expr.split(op)]
    if len(set(operands)) < 2:
        return None
    order = operands[:]
    while order == operands:
        rng.shuffle(order)
    sep = " " if f" {op} " in expr else ""
    new = text[: match.start()] + f"{sep}{op}{sep}".join(order) + text[match.end() :]
    return _with_user_text(task, new, "rewrite", rule="commute")


def numbers_of(text: str) -> list[str]:
    """The numbers in ``text``, sorted (to check that a paraphrase kept them all)."""
    return sorted(_NUMBER.findall(text))


async def policy_rewrite(task: Task, writer: Policy, sampling: Sampling) -> Task | None:
    """A paraphrase of the task by ``writer`` (``REWRITE_PROMPTS["paraphrase"]``); None when the
    reply is empty, truncated, or does not state exactly the original's numbers."""
    from verigym.data.synthesis import REWRITE_PROMPTS

    original = _user_text(task)
    ask = REWRITE_PROMPTS["paraphrase"].format(prompt=original)
    completion = await writer.complete([Message(role="user", content=ask)], sampling=sampling)
    text = completion.text.strip()
    if not text or completion.finish_reason == "length" or numbers_of(text) != numbers_of(original):
        return None
    return _with_user_text(task, text, "rewrite", rule="paraphrase", writer=writer.name)


def guided(task: Task, guide: str) -> Task:
    """``task`` with ``guide`` put before the text of its last user message."""
    return _with_user_text(task, f"{guide}\n\n{_user_text(task)}", "guide", guide=guide)


def _trainable(model: Any) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


@contextlib.contextmanager
def parameter_noise(model: Any, sigma: float, generator: torch.Generator) -> Iterator[None]:
    """Inside the block, every trainable tensor W carries W + σ·std(W)·ε (ε ~ N(0, 1), drawn
    from ``generator``); on exit the clean weights are back, bit for bit."""
    params: Sequence[torch.nn.Parameter] = _trainable(model) if sigma > 0 else []
    saved = [p.detach().clone() for p in params]
    try:
        with torch.no_grad():
            for p in params:
                scale = float(p.detach().float().std()) if p.numel() > 1 else float(p.detach().abs().mean())
                noise = torch.randn(p.shape, generator=generator, dtype=torch.float32).to(p.device, p.dtype)
                p.add_(noise, alpha=sigma * scale)
        yield
    finally:
        with torch.no_grad():
            for p, clean in zip(params, saved, strict=True):
                p.copy_(clean)
