"""Task variations and synthesis, each re-verified before it is kept.

- ``rewrite``: a Policy paraphrases a prompt, reorders its facts or adds a distractor; the
  reference answer is kept and the variant is kept only if a solver reaches that answer.
- ``svs_variants``: Self-play with Variational problem Synthesis (Liang et al. 2025, "Beyond
  Pass@1: Self-Play with Variational Problem Synthesis Sustains RLVR"): for tasks the policy
  solves with group accuracy in [0.125, 0.5], it writes variant problems from its own correct
  solutions with the same reference answer; a variant is kept if 0.125·n ≤ #correct ≤ 0.625·n.
- ``invert_numeric``: a DuPO-style dual task (She et al. 2025, "DuPO: Enabling Reliable LLM
  Self-Verification via Dual Preference Optimization"): hide one known number of a solved
  problem, give the answer, and ask for the hidden number; the original answer verifies it.
- ``synthesize_tool_tasks``: agentic task synthesis for tool environments — a Policy writes new
  user requests; one is kept only when an oracle trajectory solves it and the verifier accepts.

Every synthetic task records its provenance in ``info["provenance"]`` (method, parent id,
generator). The solver / verifier callbacks are the caller's: typically "sample n answers
with the runner and score them with the environment's rubric".
"""

from __future__ import annotations

import random
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from verigym.policies.base import Policy
from verigym.types import Message, Sampling, Task

__all__ = [
    "REWRITE_PROMPTS",
    "SolveRate",
    "invert_numeric",
    "rewrite",
    "svs_variants",
    "synthesize_tool_tasks",
]

RewriteKind = Literal["paraphrase", "reorder", "distractor"]
SolveRate = Callable[[Task, int], Awaitable[tuple[int, int]]]  # (task, n) -> (correct, valid)

REWRITE_PROMPTS: dict[str, str] = {
    "paraphrase": "Rewrite this problem in different words. Keep every number, fact and the question "
    "exactly equivalent. Reply with the rewritten problem only.\n\nProblem:\n{prompt}",
    "reorder": "Rewrite this problem stating its facts in a different order. Keep every number, fact and "
    "the question exactly equivalent. Reply with the rewritten problem only.\n\nProblem:\n{prompt}",
    "distractor": "Rewrite this problem adding one irrelevant sentence with a number that does not change "
    "the answer. Reply with the rewritten problem only.\n\nProblem:\n{prompt}",
}
_SVS_PROMPT = (
    "Here is a problem and a correct solution.\n\nProblem:\n{prompt}\n\nSolution:\n{solution}\n\n"
    "Write a NEW problem, different in wording and setting, whose answer is exactly the same as this one's. "
    "Reply with the new problem only."
)
_TOOL_PROMPT = (
    "You write realistic user requests for an assistant that has these tools:\n{tools}\n\n"
    "Example requests:\n{examples}\n\nWrite one new request of the same kind. Reply with the request only."
)


def _user_text(task: Task) -> str:
    return "\n".join(m.content for m in task.prompt if m.role == "user")


def _variant(parent: Task, text: str, method: str, generator: str, index: int, **extra: Any) -> Task:
    info = dict(parent.info)
    info["provenance"] = {"method": method, "parent": parent.id, "generator": generator, **extra}
    prompt = tuple(m for m in parent.prompt if m.role == "system") + (Message(role="user", content=text),)
    return Task(id=f"{parent.id}~{method}{index}", prompt=prompt, answer=parent.answer, info=info)


async def _ask(policy: Policy, text: str, sampling: Sampling) -> str:
    completion = await policy.complete([Message(role="user", content=text)], sampling=sampling)
    return completion.text.strip() if completion.finish_reason != "length" else ""


async def rewrite(
    task: Task,
    writer: Policy,
    solve_rate: SolveRate,
    *,
    kind: RewriteKind = "paraphrase",
    n_variants: int = 1,
    n_verify: int = 4,
    sampling: Sampling | None = None,
) -> list[Task]:
    """Rewrite ``task`` and keep variants that a solver still answers with the reference answer
    at least once in ``n_verify`` tries (errors do not count as tries)."""
    sampling = sampling or Sampling(temperature=0.8, max_tokens=512)
    kept = []
    for i in range(n_variants):
        seeded = sampling.model_copy(update={"seed": None if sampling.seed is None else sampling.seed + i})
        text = await _ask(writer, REWRITE_PROMPTS[kind].format(prompt=_user_text(task)), seeded)
        if not text:
            continue
        variant = _variant(task, text, kind, writer.name, i)
        correct, _valid = await solve_rate(variant, n_verify)
        if correct > 0:
            kept.append(variant)
    return kept


async def svs_variants(
    task: Task,
    correct_solutions: Sequence[str],
    group_accuracy: float,
    policy: Policy,
    solve_rate: SolveRate,
    *,
    n_verify: int = 8,
    band: tuple[float, float] = (0.125, 0.625),
    source_band: tuple[float, float] = (0.125, 0.5),
    sampling: Sampling | None = None,
) -> list[Task]:
    """SvS: variants written from the policy's own correct solutions of a hard-but-solvable task."""
    if not (source_band[0] <= group_accuracy <= source_band[1]):
        return []
    sampling = sampling or Sampling(temperature=1.0, max_tokens=512)
    kept = []
    for i, solution in enumerate(correct_solutions):
        text = await _ask(policy, _SVS_PROMPT.format(prompt=_user_text(task), solution=solution), sampling)
        if not text:
            continue
        variant = _variant(task, text, "svs", policy.name, i)
        correct, valid = await solve_rate(variant, n_verify)
        if valid and band[0] * valid <= correct <= band[1] * valid:
            kept.append(variant.model_copy(update={"info": {**variant.info, "solve_rate": correct / valid}}))
    return kept


_NUMBER = re.compile(r"(?<![\w.])-?\d+(?![\w.])")


def invert_numeric(
    task: Task,
    *,
    seed: int = 0,
    check: Callable[[Task], bool] | None = None,
) -> Task | None:
    """A DuPO-style dual of a solved task: one number of the prompt becomes the unknown.

    The new prompt states the original answer and asks for the hidden number, which is the new
    reference answer. ``check`` (e.g. "the hidden number is the unique solution") must accept
    the new task or it is dropped; without a check, only tasks with a numeric answer are inverted.
    """
    text = _user_text(task)
    numbers = list(_NUMBER.finditer(text))
    if task.answer is None or not numbers or not _NUMBER.fullmatch(task.answer.strip()):
        return None
    match = random.Random(f"{seed}:{task.id}").choice(numbers)
    hidden = match.group()
    question = (
        f"{text[: match.start()]}□{text[match.end() :]}\n"
        f"The answer to this problem is {task.answer.strip()}. What number does □ stand for?"
    )
    info = dict(task.info)
    info["provenance"] = {"method": "dupo_invert", "parent": task.id, "hidden_position": match.start()}
    info["inverted_from_answer"] = task.answer
    new = Task(
        id=f"{task.id}~inv{match.start()}",
        prompt=(*[m for m in task.prompt if m.role == "system"], Message(role="user", content=question)),
        answer=hidden,
        info=info,
    )
    if check is not None and not check(new):
        return None
    return new


async def synthesize_tool_tasks(
    examples: Sequence[Task],
    tool_schemas: Sequence[dict[str, Any]],
    writer: Policy,
    make_task: Callable[[str, int], Task | None],
    oracle_solves: Callable[[Task], Awaitable[bool]],
    *,
    n: int = 10,
    max_attempts: int | None = None,
    sampling: Sampling | None = None,
) -> tuple[list[Task], int]:
    """New user requests for a tool environment, kept only when ``oracle_solves`` (an oracle
    trajectory through the environment's tools, accepted by its verifier) says so.

    ``make_task(request, index)`` turns a request into a Task with the hidden data its oracle
    needs (or None when the request cannot be grounded). Returns the kept tasks and attempts.
    """
    sampling = sampling or Sampling(temperature=1.0, max_tokens=256)
    names = "\n".join(
        f"- {s['function']['name']}: {s['function'].get('description', '')}" for s in tool_schemas
    )
    shots = "\n".join(f"- {_user_text(t)}" for t in examples[:5])
    kept: list[Task] = []
    attempts = 0
    limit = max_attempts if max_attempts is not None else 4 * n
    while len(kept) < n and attempts < limit:
        seeded = sampling.model_copy(
            update={"seed": None if sampling.seed is None else sampling.seed + attempts}
        )
        attempts += 1
        request = await _ask(writer, _TOOL_PROMPT.format(tools=names, examples=shots), seeded)
        task = make_task(request, attempts) if request else None
        if task is None or not await oracle_solves(task):
            continue
        info = {**task.info, "provenance": {"method": "tool_synthesis", "generator": writer.name}}
        kept.append(task.model_copy(update={"info": info}))
    return kept, attempts
