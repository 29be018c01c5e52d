"""Instructions family: does a response follow verifiable instructions (IFEval, 25 checkers)?

``INSTRUCTIONS`` maps each IFEval instruction id to a checker; ``instructions_grader`` reads
``task.info["instructions"]`` and scores the fraction followed. Modes: ``strict`` (the response
as written) and ``loose`` (any of IFEval's 8 variants: without first/last line, ``*`` removed).
An unknown instruction id or bad kwargs is a grader error, never a 0. ``checker="official"``
reproduces lm-eval's IFEval checker verdict for verdict, bugs included (``check_official``), to
match published IFEval figures; the default ``"corrected"`` checkers fix those bugs.

Labeled suite: ``tests/suites/instructions.jsonl`` (``verigym verifier-bench --grader instructions``).

Inside: ``_checks`` (the checkers), ``_text`` (words, sentences, keywords), ``_lang`` (language
detection), ``_official`` (lm-eval's rules) and ``_official_nlp`` (the NLTK and langdetect models
they call), ``_verify`` (the checker table, strict/loose verification, the grader; re-exported here), ``_rubric`` (``instructions_rubric``: the rubric the
``instructions`` and ``ifeval`` environments share).
"""

from verigym.graders.instructions import _verify
from verigym.graders.instructions._official import OFFICIAL_CHECKERS, check_official, official_loose_variants
from verigym.graders.instructions._rubric import instructions_rubric
from verigym.graders.instructions._verify import *  # noqa: F403 (the family's names, listed once in _verify.__all__)

__all__ = ["OFFICIAL_CHECKERS", "check_official", "instructions_rubric", "official_loose_variants"]
__all__ += _verify.__all__
