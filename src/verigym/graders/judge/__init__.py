"""Judge family: does a response meet rubric criteria, as decided by an LLM judge (any ``Policy``)?

``judge_grader(policy, rubric)`` asks the judge about each criterion in its own call
(HealthBench's prompt and ``{"explanation", "criteria_met"}`` answer) and scores met points over
positive points; nested rubrics weight their children. Verdicts are cached (``JudgeCache``); an
unparseable answer is retried once, then an error, never a 0. ``evaluate_judge`` and
``judge_agreement`` measure a judge against human labels (precision, recall, F1).

Labeled suite: ``tests/suites/judge.jsonl`` (``verigym verifier-bench --grader judge``; judged by a
deterministic scripted judge, ``quoted_phrase_verdict``).

Inside: ``_rubric`` (rubric trees and scoring), ``_eval`` (agreement metrics), ``_rubric_judge``
(the judge's prompts, verdict parsing and cache, the grader; re-exported here).
"""

from verigym.graders.judge import _rubric_judge
from verigym.graders.judge._rubric_judge import *  # noqa: F403 (the family's names, listed once in _rubric_judge.__all__)

__all__ = []
__all__ += _rubric_judge.__all__
