"""Judge family: does a response meet rubric criteria, as decided by an LLM judge (any ``Policy``)?

``judge_grader(policy, rubric)`` asks the judge about each criterion in its own call
(HealthBench's prompt and ``{"explanation", "criteria_met"}`` answer) and scores met points over
positive points; nested rubrics weight their children. Verdicts are cached (``JudgeCache``); an
unparseable answer is retried once, then an error, never a 0. ``evaluate_judge`` and
``judge_agreement`` measure a judge against human labels (precision, recall, F1).

Labeled suite: ``tests/suites/judge.jsonl`` (``verigym verifier-bench --grader judge``; judged by a
deterministic scripted judge, ``quoted_phrase_verdict``).

Inside: ``_rubric`` (rubric trees and scoring), ``_eval`` (agreement metrics), ``_grader``
(re-exported here).
"""

from verigym.graders.judge._grader import (
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

__all__ = [
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
