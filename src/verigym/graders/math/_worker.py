"""Deprecated path, kept until verigym 0.3: this module moved to ``verigym.graders.math._sympy_path._worker``
(graders/math/ is grouped by evaluation path). Import from there."""

import warnings

from verigym.graders.math._sympy_path._worker import (
    WARMUP,
    CheckCrashed,
    CheckTimeout,
    WorkerPool,
    default_pool,
)

warnings.warn(
    "verigym.graders.math._worker is deprecated and goes in verigym 0.3: import from verigym.graders.math._sympy_path._worker",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["WARMUP", "CheckCrashed", "CheckTimeout", "WorkerPool", "default_pool"]
