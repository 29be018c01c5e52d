"""Deprecated path, kept until verigym 0.3: this module moved to ``verigym.graders.math._sympy_path._numeric``
(graders/math/ is grouped by evaluation path). Import from there."""

import warnings

from verigym.graders.math._sympy_path._numeric import (
    PARAMS,
    _agree,
    _value_at,
    close,
    expr_eq,
    num,
    point_value,
    points,
    sample,
    scalar_eq,
)

warnings.warn(
    "verigym.graders.math._numeric is deprecated and goes in verigym 0.3: import from verigym.graders.math._sympy_path._numeric",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = [
    "PARAMS",
    "_agree",
    "_value_at",
    "close",
    "expr_eq",
    "num",
    "point_value",
    "points",
    "sample",
    "scalar_eq",
]
