"""Deprecated path, kept until verigym 0.3: this module moved to ``verigym.graders.judge._rubric_judge`` (a name that says what
it holds). Import from there, or from ``verigym.graders.judge``."""

import warnings

from verigym.graders.judge._rubric_judge import (
    BENCH,
    JUDGE_SYSTEM,
    JUDGE_TEMPLATE,
    Criterion,
    JudgeAgreement,
    JudgeCache,
    JudgeError,
    RubricNode,
    Verdict,
    bench_verdict,
    evaluate_judge,
    judge_agreement,
    judge_criteria,
    judge_grader,
    judge_messages,
    parse_rubric,
    parse_verdict,
    quoted_phrase_verdict,
    score_node,
)

warnings.warn(
    "verigym.graders.judge._grader is deprecated and goes in verigym 0.3: import from verigym.graders.judge._rubric_judge",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = [
    "BENCH",
    "JUDGE_SYSTEM",
    "JUDGE_TEMPLATE",
    "Criterion",
    "JudgeAgreement",
    "JudgeCache",
    "JudgeError",
    "RubricNode",
    "Verdict",
    "bench_verdict",
    "evaluate_judge",
    "judge_agreement",
    "judge_criteria",
    "judge_grader",
    "judge_messages",
    "parse_rubric",
    "parse_verdict",
    "quoted_phrase_verdict",
    "score_node",
]
