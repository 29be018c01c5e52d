"""Deprecated path, kept until verigym 0.3: this module moved to ``verigym.graders.math._demanded._rounding``
(graders/math/ is grouped by evaluation path). Import from there."""

import warnings

from verigym.graders.math._demanded._rounding import Rounder, fast_round, round_fraction, round_reference

warnings.warn(
    "verigym.graders.math._rounding is deprecated and goes in verigym 0.3: import from verigym.graders.math._demanded._rounding",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["Rounder", "fast_round", "round_fraction", "round_reference"]
