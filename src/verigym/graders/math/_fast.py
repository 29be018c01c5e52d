"""Deprecated path, kept until verigym 0.3: this module moved to ``verigym.graders.math._sympy_path._fast``
(graders/math/ is grouped by evaluation path). Import from there."""

import warnings

from verigym.graders.math._sympy_path._fast import fast_sympy

warnings.warn(
    "verigym.graders.math._fast is deprecated and goes in verigym 0.3: import from verigym.graders.math._sympy_path._fast",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["fast_sympy"]
