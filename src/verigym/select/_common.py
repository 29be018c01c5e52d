"""Shared pieces of test-time selection: the ``Candidate`` a selector chooses among, the
``Selection`` it returns, and ``answer_key`` (the answer a sample votes for).

Every selector works on a list of candidates for ONE task, in sample order. Sample order
matters: it is what makes tie-breaking deterministic.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from verigym.types import Completion, Trajectory, Usage

__all__ = ["Candidate", "Selection", "answer_key", "normalize_answer", "register_answer_parser"]


@dataclass(frozen=True)
class Candidate:
    """One sampled solution of a task.

    ``answer`` is the extracted, normalised answer (None: no answer could be parsed — it does
    not vote). ``tokens`` is the number of completion tokens generated for it. ``top_logprobs``
    holds per token the top-k logprobs (descending) when the policy returned them.
    ``finished`` is False when the sample was truncated (``finish_reason="length"``) or cut.
    ``correct`` is the environment's verdict, used only to measure a selector, never by one.
    """

    index: int
    text: str
    answer: str | None = None
    tokens: int = 0
    top_logprobs: tuple[tuple[float, ...], ...] | None = None
    finished: bool = True
    correct: bool | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_completion(
        cls, index: int, completion: Completion, *, answer: str | None = None, correct: bool | None = None
    ) -> Candidate:
        return cls(
            index=index,
            text=completion.text,
            answer=answer,
            tokens=completion.usage.completion_tokens or len(completion.completion_token_ids or ()),
            top_logprobs=completion.top_logprobs,
            finished=completion.finish_reason not in ("length", "early_stop"),
            correct=correct,
        )

    @classmethod
    def from_trajectory(
        cls, index: int, trajectory: Trajectory, *, answer: str | None = None, correct: bool | None = None
    ) -> Candidate:
        """A candidate from a whole episode: all turns' tokens, the final text, and the
        concatenated top-k logprobs of every model turn (None if any turn lacks them)."""
        completions = trajectory.completions
        tops: list[tuple[float, ...]] = []
        have_tops = bool(completions)
        for c in completions:
            if c.top_logprobs is None:
                have_tops = False
                break
            tops.extend(c.top_logprobs)
        last = completions[-1] if completions else None
        finished = trajectory.error is None and trajectory.stop_reason == "done"
        if last is not None and last.finish_reason in ("length", "early_stop"):
            finished = False
        return cls(
            index=index,
            text=trajectory.final_text,
            answer=answer,
            tokens=trajectory.usage.completion_tokens,
            top_logprobs=tuple(tops) if have_tops else None,
            finished=finished,
            correct=correct,
        )


@dataclass
class Selection:
    """What a selector chose for one task.

    ``index`` is the chosen candidate's ``Candidate.index`` (None: nothing could be chosen,
    e.g. no candidate had an answer). ``fallbacks`` counts picks that were made at random
    because a selector's output could not be used (always reported, never hidden).
    ``usage`` is what the selector itself spent (a judge's prompt and completion tokens).
    """

    index: int | None
    answer: str | None = None
    method: str = ""
    fallbacks: int = 0
    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    detail: dict[str, Any] = field(default_factory=dict)


_NUM = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)$")


def normalize_answer(answer: str | None) -> str | None:
    """A canonical string for voting: whitespace, ``$``, a trailing period, thousands commas
    and leading zeros removed; numbers written as integers when they are integral
    (``"042"``, ``"42.0"`` and ``"+42"`` all become ``"42"``). Empty → None."""
    if answer is None:
        return None
    text = answer.strip().strip("$").strip()
    text = text.rstrip(".").strip()
    if not text:
        return None
    compact = text.replace(" ", "")
    if re.fullmatch(r"[+-]?\d{1,3}(,\d{3})+(\.\d+)?", compact):
        compact = compact.replace(",", "")
    if _NUM.match(compact):
        try:
            value = float(compact)
        except ValueError:
            return compact
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return repr(value)
    return compact


def _fallback_extract(text: str) -> str | None:
    try:
        from verigym.graders import format as fmt

        body = fmt.strip_think(text)
        for fn in (fmt.extract_boxed, fmt.extract_answer_line):
            found = fn(body)
            if found:
                return str(found)
    except (ImportError, AttributeError):
        pass
    body = re.sub(r"<think>.*?</think>", "", text, flags=re.S)
    boxed = re.findall(r"\\boxed\{([^{}]*)\}", body)
    if boxed:
        return str(boxed[-1])
    line = re.findall(r"(?im)^\s*answer\s*[:=]\s*(.+?)\s*$", body)
    if line:
        return str(line[-1])
    nums = re.findall(r"[+-]?\d+(?:\.\d+)?", body)
    return nums[-1] if nums else None


# Parsers for environments that do not (yet) define ``parse_answer``: env name → "module:function".
_PARSERS: dict[str, str | Callable[[str], Any]] = {
    "arithmetic": "verigym.envs.builtin.arithmetic:parse_integer"
}


def register_answer_parser(env_name: str, parser: str | Callable[[str], Any]) -> None:
    """Tell ``answer_key`` how to read answers of ``env_name`` (a callable or ``"module:function"``)."""
    _PARSERS[env_name] = parser


def _env_parser(env: Any) -> Callable[[str], Any] | None:
    parse = getattr(env, "parse_answer", None) if env is not None else None
    if callable(parse):
        return cast("Callable[[str], Any]", parse)
    spec = _PARSERS.get(str(getattr(env, "name", "")))
    if spec is None:
        return None
    if isinstance(spec, str):
        module, _, attr = spec.partition(":")
        try:
            spec = cast("Callable[[str], Any]", getattr(importlib.import_module(module), attr))
        except (ImportError, AttributeError):
            return None
        _PARSERS[str(env.name)] = spec
    return spec


def answer_key(env: Any, text: str) -> str | None:
    """The answer ``text`` votes for, normalised (None: no answer).

    Prefers the environment's own ``parse_answer(text)`` (the parser its grader uses), then a
    parser registered for its name (``register_answer_parser``; ``arithmetic`` reads the final
    integer like its grader), else ``verigym.graders.math.extract_answer``. A parser that
    raises counts as "no answer" for this sample (it does not vote).
    """
    parse = _env_parser(env)
    try:
        raw = parse(text) if parse is not None else _math_extract(text)
    except Exception:
        return None
    return normalize_answer(None if raw is None else str(raw))


def _math_extract(text: str) -> str | None:
    try:
        from verigym.graders.math import extract_answer  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return _fallback_extract(text)
    found = extract_answer(text)
    return None if found is None else str(found)
