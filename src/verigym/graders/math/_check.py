"""Deprecated path, kept until verigym 0.3: this module moved to ``verigym.graders.math._sympy_path._check``
(graders/math/ is grouped by evaluation path). Import from there."""

import warnings

from verigym.graders.math._sympy_path._check import check

warnings.warn(
    "verigym.graders.math._check is deprecated and goes in verigym 0.3: import from verigym.graders.math._sympy_path._check",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["check"]
