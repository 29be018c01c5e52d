"""Deprecated path, kept until verigym 0.3: this module moved to ``verigym.graders.math._exact_path._text``
(graders/math/ is grouped by evaluation path). Import from there."""

import warnings

from verigym.graders.math._exact_path._text import text_decide

warnings.warn(
    "verigym.graders.math._text is deprecated and goes in verigym 0.3: import from verigym.graders.math._exact_path._text",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["text_decide"]
