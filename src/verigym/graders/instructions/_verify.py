"""Verifiable instructions (IFEval, Zhou et al. 2023): 25 checkers, strict and loose modes.

``INSTRUCTIONS`` maps each IFEval instruction id (``"keywords:frequency"``, ...) to a checker
``check(response, **kwargs) -> bool`` (see ``_checks`` for the list and for the
public checker bugs fixed here). ``mode="strict"`` checks the response as written;
``mode="loose"`` accepts an instruction when any of IFEval's 8 variants passes: the response,
without its first line, without its last line, without both, and each of those with ``*`` removed.

``checker="official"`` swaps in lm-eval's official checker, bugs included (``_official``: keywords
matched as substrings, NLTK's sentence splitter, lm-eval's loose variants), to reproduce published
IFEval figures; the default ``"corrected"`` uses the fixed checkers of ``_checks``.

``instructions_grader(mode)`` reads ``task.info["instructions"]`` — a list of
``{"id": str, "kwargs": {...}}`` — (or IFEval's own ``instruction_id_list`` + ``kwargs``) and
scores the fraction of instructions followed; the detail says whether all were followed and which
failed. An unknown instruction id or bad kwargs is a grader error (the task is broken), never a 0.
Kwargs whose value is ``None`` are dropped (IFEval's released data pads kwargs with nulls).

Suite line format (``tests/suites/instructions.jsonl``)::

    {"id": str, "label": bool, "response": str,
     "instructions": [{"id": str, "kwargs": {...}}], "mode"?: "strict" | "loose",
     "checker"?: "corrected" | "official"}

``label`` is True when every instruction is followed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from verigym.graders.families import GraderFamily
from verigym.graders.format import strip_think
from verigym.graders.instructions._checks import CHECKERS, Checker
from verigym.graders.instructions._lang import SUPPORTED_LANGUAGES, detect_language
from verigym.graders.instructions._official import check_official
from verigym.rubric import Grader
from verigym.types import Grade, Task, Trajectory

__all__ = [
    "BENCH",
    "CHECKER_KINDS",
    "INSTRUCTIONS",
    "SUPPORTED_LANGUAGES",
    "Checker",
    "CheckerKind",
    "InstructionResult",
    "bench_verdict",
    "check_instruction",
    "check_instructions",
    "detect_language",
    "instructions_from_info",
    "instructions_grader",
    "loose_variants",
]

Mode = Literal["strict", "loose"]
CheckerKind = Literal["corrected", "official"]
CHECKER_KINDS: tuple[CheckerKind, ...] = ("corrected", "official")
INSTRUCTIONS: dict[str, Checker] = dict(CHECKERS)


@dataclass(frozen=True)
class InstructionResult:
    id: str
    followed: bool


def loose_variants(response: str) -> list[str]:
    """IFEval's 8 loose variants of ``response`` (empty ones dropped)."""
    lines = response.split("\n")
    first = "\n".join(lines[1:]).strip()
    last = "\n".join(lines[:-1]).strip()
    both = "\n".join(lines[1:-1]).strip()
    base = [response, first, last, both]
    variants = [*base, *(v.replace("*", "") for v in base)]
    return [v for v in variants if v.strip()]


def _clean_kwargs(instruction_id: str, kwargs: Mapping[str, Any] | None) -> dict[str, Any]:
    if kwargs is not None and not isinstance(kwargs, Mapping):
        raise ValueError(f"kwargs of {instruction_id!r} must be an object, got {type(kwargs).__name__}")
    return {k: v for k, v in (kwargs or {}).items() if v is not None}


def _check_args(mode: str, checker: str) -> None:
    if mode not in ("strict", "loose"):
        raise ValueError(f"mode must be 'strict' or 'loose', got {mode!r}")
    if checker not in CHECKER_KINDS:
        raise ValueError(f"checker must be one of {CHECKER_KINDS}, got {checker!r}")


def check_instruction(
    instruction_id: str,
    response: str,
    kwargs: Mapping[str, Any] | None = None,
    *,
    mode: Mode = "strict",
    checker: CheckerKind = "corrected",
) -> bool:
    """Is one instruction followed? ``ValueError`` for an unknown id or kwargs it does not take."""
    _check_args(mode, checker)
    if checker == "official":
        return check_official(
            instruction_id, response, _clean_kwargs(instruction_id, kwargs), loose=mode == "loose"
        )
    check = INSTRUCTIONS.get(instruction_id)
    if check is None:
        raise ValueError(f"unknown instruction id {instruction_id!r}")
    args = _clean_kwargs(instruction_id, kwargs)
    candidates = [response] if mode == "strict" else loose_variants(response)
    try:
        return any(check(text, **args) for text in candidates if text.strip())
    except TypeError as exc:
        raise ValueError(f"bad kwargs for {instruction_id!r} {sorted(args)}: {exc}") from None


def instructions_from_info(info: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``[(id, kwargs), ...]`` from ``info["instructions"]`` or IFEval's ``instruction_id_list``."""
    if "instructions" in info:
        items = info["instructions"]
        if not isinstance(items, list):
            raise ValueError("info['instructions'] must be a list of {'id', 'kwargs'}")
        out = []
        for i, item in enumerate(items):
            if not isinstance(item, Mapping) or "id" not in item:
                raise ValueError(f"info['instructions'][{i}] must be an object with an 'id'")
            out.append((str(item["id"]), dict(item.get("kwargs") or {})))
        return out
    if "instruction_id_list" in info:
        ids = list(info["instruction_id_list"])
        kwargs = list(info.get("kwargs") or [{} for _ in ids])
        if len(kwargs) != len(ids):
            raise ValueError("info['kwargs'] must have one entry per instruction id")
        return [(str(i), dict(k or {})) for i, k in zip(ids, kwargs, strict=True)]
    raise ValueError("task info has no 'instructions' (or IFEval 'instruction_id_list')")


def check_instructions(
    response: str,
    instructions: Sequence[tuple[str, Mapping[str, Any]]],
    *,
    mode: Mode = "strict",
    checker: CheckerKind = "corrected",
) -> list[InstructionResult]:
    """One result per instruction, in order."""
    return [
        InstructionResult(i, check_instruction(i, response, k, mode=mode, checker=checker))
        for i, k in instructions
    ]


def instructions_grader(
    mode: Mode = "strict",
    instructions: Sequence[Mapping[str, Any]] | None = None,
    *,
    strip_reasoning: bool = True,
    weight: float = 1.0,
    name: str = "",
    checker: CheckerKind = "corrected",
) -> Grader:
    """Fraction of instructions followed by the final reply; detail reports ``all_followed``.

    ``strip_reasoning`` checks the reply without its ``<think>...</think>`` reasoning;
    ``checker="official"`` gives lm-eval's verdicts (module docstring).
    """
    _check_args(mode, checker)
    fixed = None if instructions is None else instructions_from_info({"instructions": list(instructions)})
    for iid, _ in fixed or ():
        if iid not in INSTRUCTIONS:
            raise ValueError(f"unknown instruction id {iid!r}")

    def grade(task: Task, trajectory: Trajectory) -> Grade:
        todo = fixed if fixed is not None else instructions_from_info(task.info)
        if not todo:
            raise ValueError(f"task {task.id!r} lists no instructions")
        text = strip_think(trajectory.final_text) if strip_reasoning else trajectory.final_text
        results = check_instructions(text, todo, mode=mode, checker=checker)
        followed = sum(r.followed for r in results)
        detail = {
            "all_followed": followed == len(results),
            "followed": followed,
            "total": len(results),
            "failed": [r.id for r in results if not r.followed],
            "mode": mode,
            "checker": checker,
        }
        return Grade(score=followed / len(results), detail=json.dumps(detail))

    default = f"instructions_{mode}" if checker == "corrected" else f"instructions_official_{mode}"
    return Grader(grade, weight=weight, name=name or default)


def bench_verdict(line: dict[str, Any]) -> bool:
    """Accept when the line's response follows every instruction (``mode`` default strict)."""
    todo = instructions_from_info(line)
    if not todo:
        raise ValueError(f"instructions suite line {line.get('id')!r} lists no instructions")
    results = check_instructions(
        str(line["response"]), todo, mode=line.get("mode", "strict"), checker=line.get("checker", "corrected")
    )
    return all(r.followed for r in results)


BENCH = GraderFamily("instructions", bench_verdict, suites=("instructions.jsonl",))
