"""Deprecated path, kept until verigym 0.3: this module moved to ``verigym.graders.math._sympy_path._values``
(graders/math/ is grouped by evaluation path). Import from there."""

import warnings

from verigym.graders.math._sympy_path._values import (
    _NC,
    Eqn,
    Group,
    Mat,
    ParseError,
    Rel,
    Scalar,
    Seq,
    SetV,
    Text,
    Value,
    decimal_scalar,
    rel_to_set,
    to_sympy,
)

warnings.warn(
    "verigym.graders.math._values is deprecated and goes in verigym 0.3: import from verigym.graders.math._sympy_path._values",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = [
    "_NC",
    "Eqn",
    "Group",
    "Mat",
    "ParseError",
    "Rel",
    "Scalar",
    "Seq",
    "SetV",
    "Text",
    "Value",
    "decimal_scalar",
    "rel_to_set",
    "to_sympy",
]
