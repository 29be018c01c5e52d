"""Swe-style repository grading: lives in :mod:`verigym.graders.code.swe` (the code family); this public path stays."""

from verigym.graders.code.swe import (
    BENCH,
    PROTECTED_PATTERNS,
    TEST_PATTERNS,
    PatchError,
    SweResult,
    apply_patch,
    bench_verdict,
    framework_refs,
    grade_repo,
    is_protected,
    is_test_path,
    swe_grader,
)

__all__ = [
    "BENCH",
    "PROTECTED_PATTERNS",
    "TEST_PATTERNS",
    "PatchError",
    "SweResult",
    "apply_patch",
    "bench_verdict",
    "framework_refs",
    "grade_repo",
    "is_protected",
    "is_test_path",
    "swe_grader",
]
