"""Structured-output graders: parse JSON/YAML/TOML/CSV, validate with JSON Schema, check fields.

- ``parse_structured(text, format)`` (in ``_parse``): JSON (bare, inside a ```json fence, or — with
  ``extract=True`` — the one JSON document inside prose; two different documents are a hedge and
  fail), YAML (safe loader; only ``true``/``false`` are booleans, so ``no``/``on`` stay strings),
  TOML (``tomllib``), CSV (header row, a list of row objects; numbers coerced unless ``coerce=False``),
  XML (``{root: {child: value, "@attr": value}}``, repeated tags as lists, no DTDs).
- ``schema_grader``: 1 for a document valid under the schema (``jsonschema``, draft taken from
  ``$schema``, 2020-12 by default); otherwise, with ``partial=True``, the fraction of required
  paths (``required`` keys, recursively through ``properties`` and array ``items``) that are
  present and carry no error of their own, capped at n/(n+1) so that an invalid document never
  scores 1. ``partial=False`` is all-or-nothing. Output that does not parse scores 0 (the model's
  failure); a schema that is itself invalid is a grader error.
- ``fields_grader``: the fraction of the expected leaf values (``task.info["expected"]``, or
  ``task.answer`` as JSON) the document has right: numbers compared as numbers (1 == 1.0), strings
  casefolded with whitespace collapsed (``normalise_strings``), extra keys ignored unless ``exact``.

The graders parse the final reply with its ``<think>...</think>`` reasoning removed.

Suite line format (``tests/suites/schema.jsonl``)::

    {"id": str, "label": bool, "text": str, "format"?: "json" | "yaml" | "toml" | "csv" | "xml",
     "schema"?: {...}, "expected"?: ..., "extract"?: bool}

A line is accepted when the text parses, is valid under ``schema`` and has every ``expected`` field.
"""

from __future__ import annotations

import json
import math
import threading
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

import jsonschema

from verigym.graders.families import GraderFamily
from verigym.graders.format import strip_think
from verigym.graders.schema._parse import Format, ParseError, parse_structured
from verigym.rubric import Grader
from verigym.types import Grade, Task, Trajectory

__all__ = [
    "BENCH",
    "Format",
    "ParseError",
    "bench_verdict",
    "fields_grader",
    "fields_score",
    "parse_structured",
    "required_paths",
    "schema_grader",
    "schema_score",
]


def _resolve(schema: Any, root: Mapping[str, Any]) -> Any:
    ref = schema.get("$ref") if isinstance(schema, Mapping) else None
    if isinstance(ref, str) and ref.startswith("#/"):
        node: Any = root
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
        return _resolve(node, root)
    return schema


def required_paths(schema: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """Every path that must be present: required keys, recursively; ``"*"`` stands for array items."""

    def walk(node: Any, prefix: tuple[str, ...], depth: int) -> list[tuple[str, ...]]:
        node = _resolve(node, schema)
        if not isinstance(node, Mapping) or depth > 32:
            return []
        out: list[tuple[str, ...]] = []
        for sub in node.get("allOf", []):
            out += walk(sub, prefix, depth + 1)
        props = node.get("properties") or {}
        for key in node.get("required", []):
            out.append((*prefix, key))
            if key in props:
                out += walk(props[key], (*prefix, key), depth + 1)
        items = node.get("items")
        if isinstance(items, Mapping):
            out += walk(items, (*prefix, "*"), depth + 1)
        return out

    return list(dict.fromkeys(walk(schema, (), 0)))


def _present(instance: Any, path: Sequence[str]) -> bool:
    if not path:
        return True
    head, rest = path[0], path[1:]
    if head == "*":
        return isinstance(instance, list) and all(_present(v, rest) for v in instance)
    return isinstance(instance, Mapping) and head in instance and _present(instance[head], rest)


def _matches(error_path: Sequence[str | int], path: Sequence[str]) -> bool:
    return len(error_path) == len(path) and all(
        (p == "*" and isinstance(e, int)) or e == p for e, p in zip(error_path, path, strict=True)
    )


def _check_schema(schema: Mapping[str, Any]) -> Any:
    """A validator for ``schema``; ``jsonschema.SchemaError`` when the schema is invalid.

    Checking a schema against its metaschema costs more than validating a document, so validators
    are kept by the schema's canonical JSON (bounded; schemas are few in practice).
    """
    key = json.dumps(schema, sort_keys=True, default=str)
    with _LOCK:
        validator = _VALIDATORS.get(key)
    if validator is None:
        cls = jsonschema.validators.validator_for(dict(schema), default=jsonschema.Draft202012Validator)
        cls.check_schema(dict(schema))
        validator = cls(dict(schema))
        with _LOCK:
            if len(_VALIDATORS) >= 512:
                _VALIDATORS.pop(next(iter(_VALIDATORS)))
            _VALIDATORS[key] = validator
    return validator


_VALIDATORS: dict[str, Any] = {}
_LOCK = threading.Lock()


def schema_score(instance: Any, schema: Mapping[str, Any], *, partial: bool = True) -> tuple[float, str]:
    """``(score, detail)`` of ``instance`` under ``schema``; ``SchemaError`` for a bad schema."""
    errors = list(_check_schema(schema).iter_errors(instance))
    if not errors:
        return 1.0, "valid"
    first = min(errors, key=lambda e: len(e.absolute_path))
    where = "/".join(str(p) for p in first.absolute_path) or "(root)"
    detail = f"{len(errors)} schema errors; first at {where}: {first.message}"
    paths = required_paths(schema)
    if not partial or not paths:
        return 0.0, detail
    own = [e for e in errors if e.validator != "required"]
    ok = [p for p in paths if _present(instance, p) and not any(_matches(e.absolute_path, p) for e in own)]
    score = min(len(ok) / len(paths), len(paths) / (len(paths) + 1))
    return score, f"{detail}; {len(ok)}/{len(paths)} required paths present"


def _norm(value: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", value).casefold().split())


def _leaf_equal(got: Any, want: Any, normalise_strings: bool) -> bool:
    if isinstance(want, bool) or isinstance(got, bool):
        return got is want
    if isinstance(want, int | float) and isinstance(got, int | float):
        return math.isclose(float(got), float(want), rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(want, str) and isinstance(got, str) and normalise_strings:
        return _norm(got) == _norm(want)
    return bool(got == want) and type(got) is type(want)


def fields_score(
    instance: Any, expected: Any, *, normalise_strings: bool = True, exact: bool = False
) -> tuple[int, int, list[str]]:
    """``(right, total, wrong_paths)`` over the leaves of ``expected``."""
    wrong: list[str] = []
    total = 0

    def walk(got: Any, want: Any, path: str) -> None:
        nonlocal total
        if isinstance(want, Mapping):
            if not want:
                total += 1
                if got != {}:
                    wrong.append(path or "(root)")
                return
            for key, sub in want.items():
                walk(got.get(key, _ABSENT) if isinstance(got, Mapping) else _ABSENT, sub, f"{path}/{key}")
            if exact and isinstance(got, Mapping):
                for key in set(got) - set(want):
                    total += 1
                    wrong.append(f"{path}/{key} (unexpected)")
        elif isinstance(want, list):
            if not isinstance(got, list) or len(got) != len(want):
                total += max(1, len(want))
                wrong.append(f"{path or '(root)'} (list of {len(want)} expected)")
                return
            for i, (g, w) in enumerate(zip(got, want, strict=True)):
                walk(g, w, f"{path}/{i}")
        else:
            total += 1
            if got is _ABSENT or not _leaf_equal(got, want, normalise_strings):
                wrong.append(path or "(root)")

    walk(instance, expected, "")
    return total - len(wrong), total, wrong


_ABSENT = object()


def _document(trajectory: Trajectory, format: Format, extract: bool) -> tuple[Any, str | None]:
    try:
        return parse_structured(strip_think(trajectory.final_text), format, extract=extract), None
    except ParseError as exc:
        return None, str(exc)


def schema_grader(
    schema: Mapping[str, Any] | None = None,
    format: Format = "json",
    *,
    partial: bool = True,
    extract: bool = True,
    weight: float = 1.0,
    name: str = "schema",
) -> Grader:
    """Validity of the final reply under ``schema`` (None: ``task.info["schema"]``)."""
    if schema is not None:
        _check_schema(schema)

    def grade(task: Task, trajectory: Trajectory) -> Grade:
        sch = schema if schema is not None else task.info.get("schema")
        if not isinstance(sch, Mapping):
            raise ValueError(f"task {task.id!r} has no info['schema'] object")
        doc, err = _document(trajectory, format, extract)
        if err is not None:
            return Grade(score=0.0, detail=f"unparseable: {err}")
        score, detail = schema_score(doc, sch, partial=partial)
        return Grade(score=score, detail=detail)

    return Grader(grade, weight=weight, name=name)


def _expected_of(task: Task) -> Any:
    if "expected" in task.info:
        return task.info["expected"]
    if task.answer is None:
        raise ValueError(f"task {task.id!r} has neither info['expected'] nor an answer")
    try:
        return json.loads(task.answer)
    except ValueError:
        raise ValueError(f"task {task.id!r}: answer is not JSON") from None


def fields_grader(
    expected: Any = None,
    format: Format = "json",
    *,
    partial: bool = True,
    normalise_strings: bool = True,
    exact: bool = False,
    extract: bool = True,
    weight: float = 1.0,
    name: str = "fields",
) -> Grader:
    """Fraction of expected field values right (``partial=False``: all or nothing)."""

    def grade(task: Task, trajectory: Trajectory) -> Grade:
        want = expected if expected is not None else _expected_of(task)
        doc, err = _document(trajectory, format, extract)
        if err is not None:
            return Grade(score=0.0, detail=f"unparseable: {err}")
        right, total, wrong = fields_score(doc, want, normalise_strings=normalise_strings, exact=exact)
        score = (right / total if total else 1.0) if partial else float(not wrong)
        return Grade(
            score=score, detail=f"{right}/{total} fields right" + (f"; wrong: {wrong[:10]}" if wrong else "")
        )

    return Grader(grade, weight=weight, name=name)


def bench_verdict(line: dict[str, Any]) -> bool:
    """Accept when the text parses, validates and has every expected field (module docstring)."""
    try:
        doc = parse_structured(
            str(line["text"]), line.get("format", "json"), extract=line.get("extract", True)
        )
    except ParseError:
        return False
    if "schema" in line and schema_score(doc, line["schema"], partial=False)[0] < 1.0:
        return False
    if "expected" in line:
        return not fields_score(doc, line["expected"])[2]
    return True


BENCH = GraderFamily("schema", bench_verdict, suites=("schema.jsonl",))
