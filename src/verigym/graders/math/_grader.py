"""Deprecated path, kept until verigym 0.3: this module moved to ``verigym.graders.math._equivalence``
(graders/math/ is grouped by evaluation path). Import from there."""

import warnings

from verigym.graders.math._equivalence import (
    BENCH,
    DEFAULT_TIMEOUT,
    SUITE_FIELDS,
    MathVerdict,
    _fast,
    bench_verdict,
    bench_warmup,
    check_equivalent,
    clear_caches,
    extract_answer,
    math_grader,
)

warnings.warn(
    "verigym.graders.math._grader is deprecated and goes in verigym 0.3: import from verigym.graders.math._equivalence",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = [
    "BENCH",
    "DEFAULT_TIMEOUT",
    "SUITE_FIELDS",
    "MathVerdict",
    "_fast",
    "bench_verdict",
    "bench_warmup",
    "check_equivalent",
    "clear_caches",
    "extract_answer",
    "math_grader",
]
