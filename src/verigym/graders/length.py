"""Length graders: DAPO soft overlong punishment, a per-token cost and a max-length gate.

The pure functions take lengths and are what a trainer reuses:

- ``soft_overlong_penalty(length, max_len, cache_len)`` — DAPO (Yu et al. 2025, "DAPO: An Open-Source
  LLM Reinforcement Learning System at Scale", eq. 13), added to the correctness reward::

      0                                  if |y| <= L_max - L_cache
      ((L_max - L_cache) - |y|) / L_cache  if L_max - L_cache < |y| <= L_max
      -1                                 if |y| > L_max

- ``token_cost_penalty(tokens, cost_per_token)`` — ``-tokens * cost_per_token`` (a value to add).

The Graders read token counts from ``trajectory.completions``: the exact token ids when the policy
returned them, else ``usage.completion_tokens``. A completion with text but no count at all is an
error (an unknown length is not a zero length). ``per`` chooses what "length" means over a
multi-turn episode: ``"total"`` (sum, default), ``"max"`` (the longest completion) or ``"last"``.

Suite line format (``tests/suites/length.jsonl``, for ``verigym verifier-bench``)::

    {"id": str, "label": bool, "kind": "overlong" | "cost" | "max_length",
     "length": int,                              # completion tokens
     "max_len": int, "cache_len": int,           # kind=overlong
     "cost_per_token": float, "budget": float,   # kind=cost: accept iff penalty >= -budget
     "max_tokens": int, "truncated"?: bool,      # kind=max_length
     "expected"?: float}                         # the exact value the pure function must return

A line is accepted when no penalty applies (overlong: penalty == 0; cost: within budget;
max_length: within the limit and not truncated).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from verigym.graders.families import GraderFamily
from verigym.rubric import Grader
from verigym.types import Completion, Grade, Task, Trajectory

__all__ = [
    "BENCH",
    "bench_verdict",
    "completion_lengths",
    "max_length_grader",
    "overlong_grader",
    "soft_overlong_penalties",
    "soft_overlong_penalty",
    "token_cost_grader",
    "token_cost_penalty",
]

Per = Literal["total", "max", "last"]


def soft_overlong_penalty(length: int, max_len: int, cache_len: int) -> float:
    """DAPO soft overlong punishment for a response of ``length`` tokens (0, a ramp to -1, or -1)."""
    if max_len <= 0 or cache_len < 0 or cache_len > max_len:
        raise ValueError(f"need 0 <= cache_len <= max_len and max_len > 0, got {max_len=}, {cache_len=}")
    if length < 0:
        raise ValueError(f"length must be >= 0, got {length}")
    start = max_len - cache_len
    if length <= start:
        return 0.0
    if length <= max_len:
        return (start - length) / cache_len
    return -1.0


def soft_overlong_penalties(lengths: Sequence[int], max_len: int, cache_len: int) -> list[float]:
    """``soft_overlong_penalty`` for a batch of lengths (settings validated once)."""
    soft_overlong_penalty(0, max_len, cache_len)
    start = max_len - cache_len
    out = []
    for n in lengths:
        if n <= start:
            if n < 0:
                raise ValueError(f"length must be >= 0, got {n}")
            out.append(0.0)
        elif n <= max_len:
            out.append((start - n) / cache_len)
        else:
            out.append(-1.0)
    return out


def token_cost_penalty(tokens: int, cost_per_token: float) -> float:
    """``-tokens * cost_per_token``: a cost to add to the reward for every completion token."""
    if tokens < 0 or cost_per_token < 0:
        raise ValueError(f"tokens and cost_per_token must be >= 0, got {tokens=}, {cost_per_token=}")
    return -float(tokens) * cost_per_token


def _count(c: Completion) -> int:
    if c.completion_token_ids is not None:
        return len(c.completion_token_ids)
    if c.usage.completion_tokens == 0 and (c.text or c.tool_calls):
        raise ValueError("a completion has text but no token count (no token ids, usage.completion_tokens=0)")
    return c.usage.completion_tokens


def completion_lengths(trajectory: Trajectory) -> list[int]:
    """The completion token count of every model turn; raises ``ValueError`` when one is unknown."""
    return [_count(c) for c in trajectory.completions]


def _length(trajectory: Trajectory, per: Per) -> int:
    lengths = completion_lengths(trajectory)
    if not lengths:
        return 0
    if per == "total":
        return sum(lengths)
    if per == "max":
        return max(lengths)
    return lengths[-1]


def overlong_grader(
    max_len: int, cache_len: int, *, per: Per = "total", weight: float = 1.0, name: str = "overlong"
) -> Grader:
    """A Grader whose score is the DAPO soft overlong penalty (0 down to -1); add it to correctness."""
    soft_overlong_penalty(0, max_len, cache_len)  # validate the settings now, not at grading time

    def grade(task: Task, trajectory: Trajectory) -> Grade:
        n = _length(trajectory, per)
        value = soft_overlong_penalty(n, max_len, cache_len)
        return Grade(score=value, detail=f"length={n} max_len={max_len} cache_len={cache_len}")

    return Grader(grade, weight=weight, name=name)


def token_cost_grader(
    cost_per_token: float, *, per: Per = "total", weight: float = 1.0, name: str = "token_cost"
) -> Grader:
    """A Grader whose score is ``-tokens * cost_per_token``."""
    token_cost_penalty(0, cost_per_token)

    def grade(task: Task, trajectory: Trajectory) -> Grade:
        n = _length(trajectory, per)
        return Grade(score=token_cost_penalty(n, cost_per_token), detail=f"tokens={n}")

    return Grader(grade, weight=weight, name=name)


def max_length_grader(
    max_tokens: int,
    *,
    per: Per = "max",
    fail_truncated: bool = True,
    weight: float = 1.0,
    name: str = "max_length",
) -> Grader:
    """A format gate: 1 when the length is ≤ ``max_tokens`` (and, by default, no completion was
    cut off by the token limit: ``finish_reason == "length"``), else 0."""
    if max_tokens <= 0:
        raise ValueError(f"max_tokens must be > 0, got {max_tokens}")

    def grade(task: Task, trajectory: Trajectory) -> Grade:
        n = _length(trajectory, per)
        if fail_truncated and any(c.finish_reason == "length" for c in trajectory.completions):
            return Grade(score=0.0, detail=f"truncated (finish_reason=length), length={n}")
        ok = n <= max_tokens
        return Grade(score=float(ok), detail=f"length={n} {'<=' if ok else '>'} max_tokens={max_tokens}")

    return Grader(grade, weight=weight, name=name)


def _need(line: dict[str, Any], keys: Sequence[str]) -> list[Any]:
    missing = [k for k in keys if k not in line]
    if missing:
        raise ValueError(f"length suite line {line.get('id')!r} lacks {missing}")
    return [line[k] for k in keys]


def bench_verdict(line: dict[str, Any]) -> bool:
    """Accept (True) when no length penalty applies to the line; see the module docstring."""
    kind = line.get("kind", "overlong")
    if kind == "overlong":
        length, max_len, cache_len = _need(line, ["length", "max_len", "cache_len"])
        value = soft_overlong_penalty(int(length), int(max_len), int(cache_len))
        accepted = value == 0.0
    elif kind == "cost":
        length, cost, budget = _need(line, ["length", "cost_per_token", "budget"])
        value = token_cost_penalty(int(length), float(cost))
        accepted = value >= -float(budget)
    elif kind == "max_length":
        length, max_tokens = _need(line, ["length", "max_tokens"])
        value = float(int(length) <= int(max_tokens))
        accepted = bool(value) and not line.get("truncated", False)
    else:
        raise ValueError(f"length suite line {line.get('id')!r}: unknown kind {kind!r}")
    if "expected" in line and abs(value - float(line["expected"])) > 1e-9:
        raise ValueError(
            f"length suite line {line.get('id')!r}: computed {value}, expected {line['expected']}"
        )
    return accepted


BENCH = GraderFamily("length", bench_verdict, suites=("length.jsonl",))
