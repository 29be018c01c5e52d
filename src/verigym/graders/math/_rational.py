"""Deprecated path, kept until verigym 0.3: this module moved to ``verigym.graders.math._exact_path._rational``
(graders/math/ is grouped by evaluation path). Import from there."""

import warnings

from verigym.graders.math._exact_path._rational import (
    clear_fast_caches,
    exact_number,
    fast_check,
    fast_decide,
)

warnings.warn(
    "verigym.graders.math._rational is deprecated and goes in verigym 0.3: import from verigym.graders.math._exact_path._rational",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["clear_fast_caches", "exact_number", "fast_check", "fast_decide"]
