"""BFCL-style AST matching of tool calls against allowed answers (the engine of ``toolcall.py``).

An *answer* is one expected call in the BFCL ``possible_answer`` form::

    {"get_weather": {"city": ["Paris", "paris, france"], "unit": ["celsius", ""]}}

each parameter maps to the list of values allowed for it; ``""`` in the list means the parameter
may be omitted. A *function doc* is a BFCL/OpenAI function schema (``{"name", "parameters":
{"type", "properties", "required"}}``) and supplies the types.

Fixed relative to the public BFCL checker (Patil et al. 2024, "The Berkeley Function Calling
Leaderboard"):

- types are checked to any depth (array items, object properties, tuple positions), not one level;
- a ``tuple`` parameter is not satisfied by any list: its length and per-position types are checked;
- ``bool`` is not an ``integer`` (Python's ``True == 1``), while an integer is accepted for a float;
- string normalisation (``strings="strict"``, the default) is casefold + whitespace only
  (``"Paris,FR"`` equals ``"paris, fr"``), so ``"-5"`` is not ``"5"`` and ``"a.b"`` is not
  ``"ab"``. ``strings="bfcl"`` follows BFCL's documented normalisation instead (its
  ``standardize_string``: spaces and ``, . / - _ * ^`` deleted, lowercased, ``'`` read as
  ``"``), so "Seattle WA" equals "Seattle, WA" — use it to reproduce BFCL's scores.

``strings="bfcl"`` also applies BFCL's type rules: an allowed value whose type differs from the
declared type (BFCL's *variable reference*: the string ``"data['sales']"`` allowed for an
``array`` parameter; strings allowed in an ``array`` of integers) accepts a value of that same
type, compared as written; a JSON string holding an array is read as that array. In the default
mode the declared type wins (a wrong-typed allowed value is a gold error, never a pass).
"""

from __future__ import annotations

import functools
import json
import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "STRING_MODES",
    "Call",
    "MatchResult",
    "bfcl_string",
    "check_type",
    "match_call",
    "match_calls",
    "normalise_string",
    "values_equal",
]

_LIST_PUNCT = re.compile(r"\s*([,;])\s*")
_BFCL_STRIP = re.compile(r"[ ,./\-_*^]")
STRING_MODES = ("strict", "bfcl")
_INT_TYPES = {"integer", "int"}
_FLOAT_TYPES = {"float", "number", "double"}
_STR_TYPES = {"string", "str"}
_BOOL_TYPES = {"boolean", "bool"}
_LIST_TYPES = {"array", "list"}
_DICT_TYPES = {"dict", "object"}


@dataclass(frozen=True)
class Call:
    """One call the model made: a function name and its parsed arguments."""

    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class MatchResult:
    ok: bool
    reason: str = ""


@functools.lru_cache(maxsize=65536)
def normalise_string(value: str) -> str:
    """Unicode NFKC, casefold, trimmed, whitespace collapsed (none before ``,`` ``;``, one after)."""
    text = " ".join(unicodedata.normalize("NFKC", value).casefold().split())
    return _LIST_PUNCT.sub(r"\1 ", text).strip()


@functools.lru_cache(maxsize=65536)
def bfcl_string(value: str) -> str:
    """BFCL's ``standardize_string``: spaces and ``, . / - _ * ^`` removed, lowercased, ``'`` → ``"``."""
    return _BFCL_STRIP.sub("", value).lower().replace("'", '"')


def _strings_equal(a: str, b: str, strings: str) -> bool:
    if strings == "bfcl":
        return bfcl_string(a) == bfcl_string(b)
    return normalise_string(a) == normalise_string(b)


def check_type(value: Any, schema: Mapping[str, Any], path: str) -> str | None:
    """None when ``value`` has the type ``schema`` declares (recursively), else the reason."""
    enum = schema.get("enum")
    if isinstance(enum, list) and not any(values_equal(value, e) for e in enum):
        return f"{path}: {value!r} is not one of {enum!r}"
    kind = str(schema.get("type", "any")).lower()
    if kind in {"any", ""}:
        return None
    if kind in _BOOL_TYPES:
        return None if isinstance(value, bool) else f"{path}: expected boolean, got {type(value).__name__}"
    if kind in _INT_TYPES:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return None if ok else f"{path}: expected integer, got {type(value).__name__}"
    if kind in _FLOAT_TYPES:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return None if ok else f"{path}: expected number, got {type(value).__name__}"
    if kind in _STR_TYPES:
        return None if isinstance(value, str) else f"{path}: expected string, got {type(value).__name__}"
    if kind == "tuple":
        if not isinstance(value, list | tuple):
            return f"{path}: expected tuple, got {type(value).__name__}"
        positions = schema.get("prefixItems", schema.get("items"))
        if isinstance(positions, list):
            if len(value) != len(positions):
                return f"{path}: tuple of {len(positions)} expected, got {len(value)} items"
            for i, (v, s) in enumerate(zip(value, positions, strict=True)):
                if (err := check_type(v, s, f"{path}[{i}]")) is not None:
                    return err
            return None
        return _check_items(value, schema, path)
    if kind in _LIST_TYPES:
        if not isinstance(value, list):
            return f"{path}: expected array, got {type(value).__name__}"
        return _check_items(value, schema, path)
    if kind in _DICT_TYPES:
        if not isinstance(value, dict):
            return f"{path}: expected object, got {type(value).__name__}"
        props: Mapping[str, Any] = schema.get("properties") or {}
        for key in schema.get("required", []):
            if key not in value:
                return f"{path}.{key}: required key missing"
        for key, v in value.items():
            if key in props:
                if (err := check_type(v, props[key], f"{path}.{key}")) is not None:
                    return err
            elif props and schema.get("additionalProperties", True) is False:
                return f"{path}.{key}: unexpected key"
        return None
    return f"{path}: unknown declared type {kind!r}"


def _check_items(value: Sequence[Any], schema: Mapping[str, Any], path: str) -> str | None:
    items = schema.get("items")
    if isinstance(items, Mapping):
        for i, v in enumerate(value):
            if (err := check_type(v, items, f"{path}[{i}]")) is not None:
                return err
    return None


def _numbers_equal(a: Any, b: Any) -> bool:
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=0.0)


def values_equal(value: Any, allowed: Any, strings: str = "strict") -> bool:
    """Deep equality with normalised strings (``strings`` mode), int == float, bool never a number."""
    if isinstance(allowed, bool) or isinstance(value, bool):
        return isinstance(allowed, bool) and isinstance(value, bool) and allowed is value
    if isinstance(allowed, int | float) and isinstance(value, int | float):
        return _numbers_equal(value, allowed)
    if isinstance(allowed, str) and isinstance(value, str):
        return _strings_equal(value, allowed, strings)
    if isinstance(allowed, list | tuple) and isinstance(value, list | tuple):
        return len(value) == len(allowed) and all(
            values_equal(v, a, strings) for v, a in zip(value, allowed, strict=True)
        )
    if isinstance(allowed, Mapping) and isinstance(value, Mapping):
        return _dict_matches(value, allowed, strings)
    if allowed is None or value is None:
        return allowed is None and value is None
    return False


def _dict_matches(value: Mapping[str, Any], allowed: Mapping[str, Any], strings: str = "strict") -> bool:
    """A nested dict answer: each key maps to a list of allowed values (``""`` = may be omitted)
    in BFCL's nested form, or to a literal value."""
    for key in value:
        if key not in allowed:
            return False
    for key, options in allowed.items():
        opts = options if isinstance(options, list) else [options]
        if key not in value:
            if "" not in opts:
                return False
            continue
        if not any(values_equal(value[key], o, strings) for o in opts if o != "" or value[key] == ""):
            return False
    return True


def _param_ok(value: Any, options: Sequence[Any], strings: str = "strict") -> bool:
    return any(values_equal(value, o, strings) for o in options if not (o == "" and value != ""))


def _variable_reference(value: Any, options: Sequence[Any], schema: Mapping[str, Any], strings: str) -> bool:
    """BFCL's rule: an allowed value of another type than declared (a variable's name, or an
    array written as a JSON string) accepts a value of that same type, compared as written."""
    for option in options:
        if option == "" or check_type(option, schema, "") is None:
            continue
        if type(option) is type(value) and values_equal(value, option, strings):
            return True
        if isinstance(option, str) and isinstance(value, list | tuple):
            try:
                parsed = json.loads(option)
            except ValueError:
                continue
            if isinstance(parsed, list) and values_equal(value, parsed, strings):
                return True
    return False


def match_call(
    call: Call,
    answer: Mapping[str, Mapping[str, Sequence[Any]]],
    doc: Mapping[str, Any] | None,
    strings: str = "strict",
) -> MatchResult:
    """Does ``call`` satisfy one expected ``answer`` (``{name: {param: [allowed, ...]}}``)?"""
    if len(answer) != 1:
        return MatchResult(False, f"an answer must name exactly one function, got {list(answer)}")
    ((name, params),) = answer.items()
    if call.name != name:
        return MatchResult(False, f"called {call.name!r}, expected {name!r}")
    props: Mapping[str, Any] = {}
    required: Sequence[str] = ()
    if doc is not None:
        schema = doc.get("parameters") or {}
        props = schema.get("properties") or {}
        required = schema.get("required") or ()
    for key in required:
        if key not in call.arguments:
            return MatchResult(False, f"{name}: required parameter {key!r} missing")
    for key, value in call.arguments.items():
        if key not in params or (doc is not None and key not in props):
            return MatchResult(False, f"{name}: unexpected parameter {key!r}")
        if key in props and (err := check_type(value, props[key], f"{name}.{key}")) is not None:
            if strings == "bfcl" and _variable_reference(value, params[key], props[key], strings):
                continue
            return MatchResult(False, err)
        if not _param_ok(value, params[key], strings):
            return MatchResult(False, f"{name}.{key}: value {value!r} not in allowed {list(params[key])!r}")
    for key, options in params.items():
        if key not in call.arguments and "" not in options:
            return MatchResult(False, f"{name}: parameter {key!r} omitted but not optional here")
    return MatchResult(True, "")


def match_calls(
    calls: Sequence[Call],
    answers: Sequence[Mapping[str, Mapping[str, Sequence[Any]]]],
    functions: Sequence[Mapping[str, Any]] | None = None,
    *,
    ordered: bool = False,
    strings: str = "strict",
) -> MatchResult:
    """Match every call to exactly one answer (order-free unless ``ordered``); no extra, no missing.

    ``strings``: ``"strict"`` or ``"bfcl"`` string comparison (see the module docstring)."""
    if strings not in STRING_MODES:
        raise ValueError(f"strings must be one of {STRING_MODES}, got {strings!r}")
    docs = {str(f.get("name")): f for f in functions or ()}
    if len(calls) != len(answers):
        names = [c.name for c in calls]
        return MatchResult(False, f"made {len(calls)} calls {names}, expected {len(answers)}")
    if functions is not None:
        for c in calls:
            if c.name not in docs:
                return MatchResult(False, f"called unknown function {c.name!r}")

    def doc_of(answer: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return docs.get(next(iter(answer))) if functions is not None else None

    if ordered or len(calls) == 1:
        for c, a in zip(calls, answers, strict=True):
            res = match_call(c, a, doc_of(a), strings)
            if not res.ok:
                return res
        return MatchResult(True)
    cache: dict[tuple[int, int], MatchResult] = {}

    def pair(i: int, j: int) -> MatchResult:  # computed only when the matching asks for it
        if (i, j) not in cache:
            cache[(i, j)] = match_call(calls[i], answers[j], doc_of(answers[j]), strings)
        return cache[(i, j)]

    owner: list[int | None] = [None] * len(answers)

    def augment(i: int, seen: set[int]) -> bool:  # Kuhn's bipartite matching; n is tiny
        for j in range(len(answers)):
            if j not in seen and pair(i, j).ok:
                seen.add(j)
                prev = owner[j]
                if prev is None or augment(prev, seen):
                    owner[j] = i
                    return True
        return False

    for i in range(len(calls)):
        if not augment(i, set()):
            reasons = [r.reason for j in range(len(answers)) if (r := pair(i, j)).reason]
            closest = min(reasons, key=lambda r: ("called" in r, len(r))) if reasons else "no answer left"
            return MatchResult(False, f"call {i} ({calls[i].name}) matches no remaining answer: {closest}")
    return MatchResult(True)
