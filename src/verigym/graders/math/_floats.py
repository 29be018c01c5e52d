"""Deprecated path, kept until verigym 0.3: this module moved to ``verigym.graders.math._sympy_path._floats``
(graders/math/ is grouped by evaluation path). Import from there."""

import warnings

from verigym.graders.math._sympy_path._floats import Unsure, fvalue

warnings.warn(
    "verigym.graders.math._floats is deprecated and goes in verigym 0.3: import from verigym.graders.math._sympy_path._floats",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["Unsure", "fvalue"]
