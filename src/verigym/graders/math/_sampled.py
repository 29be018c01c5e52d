"""Deprecated path, kept until verigym 0.3: this module moved to ``verigym.graders.math._float_path._sampled``
(graders/math/ is grouped by evaluation path). Import from there."""

import warnings

from verigym.graders.math._float_path._sampled import clear_sampled_caches, sampled_check, sampled_decide

warnings.warn(
    "verigym.graders.math._sampled is deprecated and goes in verigym 0.3: import from verigym.graders.math._float_path._sampled",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["clear_sampled_caches", "sampled_check", "sampled_decide"]
