"""Numbers that must stay finite: config values (finite and within float32 range, since every one of
them ends up multiplying float32 weights, rewards or gradients) and the JSON a run writes (no
``Infinity``/``NaN``, which is not JSON: a non-finite value becomes ``null`` and its path is kept).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel

__all__ = ["FLOAT32_MAX", "bad_number", "first_bad_number", "json_safe", "walk_numbers"]

FLOAT32_MAX = 3.4028234663852886e38


def bad_number(value: float) -> str | None:
    """Why ``value`` cannot be a config number (non-finite, or outside float32's range), or None."""
    if not math.isfinite(value):
        return f"must be a finite number, got {value!r}"
    if abs(value) > FLOAT32_MAX:
        return f"must lie within float32 range (±3.4e38), got {value!r}"
    return None


def walk_numbers(value: Any, path: str = "") -> Iterator[tuple[str, float]]:
    """``(dotted path, float)`` of every float in a pydantic model, mapping, list or tuple (bools and
    ints are not floats; an int too large for float32 is checked as well)."""
    if isinstance(value, bool):
        return
    if isinstance(value, float):
        yield path, value
    elif isinstance(value, int):
        if abs(value) > FLOAT32_MAX:
            yield path, float("inf")
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from walk_numbers(getattr(value, name), f"{path}.{name}" if path else name)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from walk_numbers(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from walk_numbers(v, f"{path}[{i}]")


def first_bad_number(value: Any) -> str | None:
    """``PATH: why`` for the first number of ``value`` that is not finite or not within float32 range."""
    for path, number in walk_numbers(value):
        why = bad_number(number)
        if why is not None:
            return f"{path}: {why}" if path else why
    return None


def json_safe(value: Any, path: str = "", found: dict[str, str] | None = None) -> Any:
    """``value`` with every non-finite float replaced by None; ``found`` (when given) collects
    ``{path: "inf" | "-inf" | "nan"}`` of the replaced ones."""
    if isinstance(value, float) and not math.isfinite(value):
        if found is not None:
            found[path or "value"] = repr(value)
        return None
    if isinstance(value, Mapping):
        return {k: json_safe(v, f"{path}.{k}" if path else str(k), found) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v, f"{path}[{i}]", found) for i, v in enumerate(value)]
    return value
