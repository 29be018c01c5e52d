"""GenSelect: a model reads several candidate solutions at once and names the best one.

Reference: Toshniwal et al. 2025, "GenSelect: A Generative Approach to Best-of-N"
(QwQ-32B on Comp-Math-24-25: 60.0 → 73.0 with GenSelect@32).

* Candidates that are incomplete (truncated, cut early, or with an unclosed ``<think>``) are
  dropped; the reasoning (``<think>…</think>``) of the rest is stripped.
* The survivors are shuffled with a seed and split into windows of at most ``window`` (8)
  candidates of balanced sizes; the selector sees each window with a fixed prompt
  (``PROMPT``) and ends with ``Judgment: IDX``. Winners go on to the next round (a knockout
  tournament) until one is left. A window of one candidate advances without a call, so any N
  works, divisible by the window or not.
* When the selector's answer cannot be used (no ``Judgment:`` line, an index out of range, a
  failed request), the window's winner is drawn at random with a seed. Every such fallback is
  counted in ``Selection.fallbacks`` and described in ``detail["rounds"]`` — a failed parse is
  never silently read as index 0.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Sequence
from typing import Any

from verigym.policies.base import Policy
from verigym.select._common import Candidate, Selection
from verigym.select.methods import SelectContext, register_method
from verigym.types import Message, Sampling, Task, Usage

__all__ = [
    "PROMPT",
    "build_prompt",
    "parse_judgment",
    "pick",
    "problem_text",
    "select_genselect",
    "split_windows",
    "strip_reasoning",
]

PROMPT = """You will be given a problem followed by {count} candidate solutions, indexed 0 to {last}.
Analyse the solutions carefully: check each step and each final answer, note where they agree
and where they disagree, and decide which solution is most likely to be correct.

Problem:
{problem}

{solutions}
End your reply with exactly one line of the form
Judgment: IDX
where IDX is the index (0 to {last}) of the best solution."""

DEFAULT_SAMPLING = Sampling(temperature=0.0, max_tokens=1024)
_JUDGMENT = re.compile(r"judgment\s*:\s*\**\s*\[?\s*(-?\d+)", re.IGNORECASE)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)


def strip_reasoning(text: str) -> str | None:
    """``text`` without ``<think>…</think>`` blocks; None when a ``<think>`` is never closed
    (the reasoning was cut off, so the solution is incomplete)."""
    body = _THINK.sub("", text)
    if "<think>" in body:
        return None
    return body.replace("</think>", "").strip()


def problem_text(task: Task) -> str:
    """The problem as the selector sees it: the task's last user message."""
    users = [m.content for m in task.prompt if m.role == "user"]
    return users[-1] if users else ""


def build_prompt(problem: str, solutions: Sequence[str]) -> list[Message]:
    """The fixed GenSelect prompt for one window of solutions."""
    blocks = "".join(f"Solution {i}:\n{s}\n\n" for i, s in enumerate(solutions))
    text = PROMPT.format(count=len(solutions), last=len(solutions) - 1, problem=problem, solutions=blocks)
    return [Message(role="user", content=text)]


def parse_judgment(text: str, count: int) -> int | None:
    """The index after the LAST ``Judgment:`` in ``text`` (reasoning stripped first), or None
    when there is none or it is outside ``0..count-1``."""
    body = _THINK.sub("", text)
    found = _JUDGMENT.findall(body)
    if not found:
        return None
    idx = int(found[-1])
    return idx if 0 <= idx < count else None


def split_windows(items: Sequence[int], window: int) -> list[list[int]]:
    """Split into ⌈n/window⌉ consecutive windows whose sizes differ by at most one."""
    if window < 2:
        raise ValueError(f"window must be ≥ 2, got {window}")
    n = len(items)
    if n == 0:
        return []
    parts = -(-n // window)
    base, extra = divmod(n, parts)
    out: list[list[int]] = []
    start = 0
    for p in range(parts):
        size = base + (1 if p < extra else 0)
        out.append(list(items[start : start + size]))
        start += size
    return out


async def _judge(
    policy: Policy,
    problem: str,
    members: list[int],
    bodies: Sequence[str],
    sampling: Sampling,
    rng: random.Random,
) -> tuple[int, dict[str, Any], Usage]:
    """One window: returns the winner (a position in ``bodies``), a log entry and the usage."""
    entry: dict[str, Any] = {"window": list(members)}
    try:
        completion = await policy.complete(
            build_prompt(problem, [bodies[m] for m in members]), sampling=sampling
        )
    except Exception as exc:
        entry["fallback"] = f"selector request failed: {type(exc).__name__}: {exc}"
        winner = rng.choice(members)
        entry["chosen"] = winner
        return winner, entry, Usage()
    local = parse_judgment(completion.text, len(members))
    if local is None:
        tail = completion.text.strip()[-80:]
        entry["fallback"] = f"no usable 'Judgment: IDX' (0..{len(members) - 1}) in selector output: {tail!r}"
        winner = rng.choice(members)
    else:
        winner = members[local]
    entry["chosen"] = winner
    return winner, entry, completion.usage


async def pick(
    policy: Policy,
    problem: str,
    solutions: Sequence[str],
    *,
    finished: Sequence[bool] | None = None,
    window: int = 8,
    seed: int = 0,
    sampling: Sampling | None = None,
) -> Selection:
    """Choose the best of ``solutions`` (e.g. to pick an SFT demonstration among verified ones).

    Returns a ``Selection`` whose ``index`` is a position in ``solutions`` (None when no
    solution is complete). ``fallbacks`` counts windows decided at random; ``calls`` the
    selector requests; ``usage`` their tokens; ``detail["rounds"]`` the whole tournament.
    """
    sampling = sampling or DEFAULT_SAMPLING
    done = list(finished) if finished is not None else [True] * len(solutions)
    if len(done) != len(solutions):
        raise ValueError(f"pick: {len(solutions)} solutions but {len(done)} finished flags")
    bodies: list[str] = []
    alive: list[int] = []
    for i, (text, ok) in enumerate(zip(solutions, done, strict=True)):
        body = strip_reasoning(text) if ok else None
        bodies.append(body or "")
        if body is not None:
            alive.append(i)
    result = Selection(
        index=None, method="genselect", detail={"rounds": [], "dropped": len(solutions) - len(alive)}
    )
    if not alive:
        result.detail["reason"] = "no complete solution"
        return result
    rng = random.Random(seed)
    rng.shuffle(alive)
    usage = Usage()
    round_no = 0
    while len(alive) > 1:
        windows = split_windows(alive, window)
        jobs = []
        for w_no, members in enumerate(windows):
            if len(members) == 1:
                continue
            w_rng = random.Random(f"{seed}:{round_no}:{w_no}")
            w_sampling = (
                sampling
                if sampling.seed is None
                else sampling.model_copy(update={"seed": sampling.seed + w_no})
            )
            jobs.append(_judge(policy, problem, members, bodies, w_sampling, w_rng))
        judged = iter(await asyncio.gather(*jobs))
        winners: list[int] = []
        entries: list[dict[str, Any]] = []
        for members in windows:
            if len(members) == 1:
                winners.append(members[0])
                entries.append({"window": members, "chosen": members[0], "bye": True})
                continue
            winner, entry, used = next(judged)
            result.calls += 1
            usage = usage + used
            if "fallback" in entry:
                result.fallbacks += 1
            winners.append(winner)
            entries.append(entry)
        result.detail["rounds"].append(entries)
        rng.shuffle(winners)
        alive = winners
        round_no += 1
    result.index = alive[0]
    result.usage = usage
    return result


async def select_genselect(
    candidates: Sequence[Candidate],
    policy: Policy,
    problem: str,
    *,
    window: int = 8,
    seed: int = 0,
    sampling: Sampling | None = None,
) -> Selection:
    """GenSelect over candidates; the result's ``index`` is the chosen ``Candidate.index``."""
    sel = await pick(
        policy,
        problem,
        [c.text for c in candidates],
        finished=[c.finished for c in candidates],
        window=window,
        seed=seed,
        sampling=sampling,
    )
    if sel.index is not None:
        chosen = candidates[sel.index]
        sel.index, sel.answer = chosen.index, chosen.answer
    return sel


async def _genselect(task: Task, candidates: Sequence[Candidate], ctx: SelectContext) -> Selection:
    judge = ctx.need_judge("genselect")
    cfg = ctx.config
    return await select_genselect(
        candidates,
        judge,
        problem_text(task),
        window=cfg.genselect_window,
        seed=ctx.seed,
        sampling=cfg.judge_sampling,
    )


register_method("genselect", _genselect, needs_judge=True)
