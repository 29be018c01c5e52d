"""Deprecated path, kept until verigym 0.3: this module moved to ``verigym.graders.math._demanded._forms``
(graders/math/ is grouped by evaluation path). Import from there."""

import warnings

from verigym.graders.math._demanded._forms import (
    Demand,
    Forms,
    clear_form_caches,
    demanded,
    enforce,
    rounded_reason,
)

warnings.warn(
    "verigym.graders.math._forms is deprecated and goes in verigym 0.3: import from verigym.graders.math._demanded._forms",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["Demand", "Forms", "clear_form_caches", "demanded", "enforce", "rounded_reason"]
