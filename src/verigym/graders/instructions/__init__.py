"""Instructions family: does a response follow verifiable instructions (IFEval, 25 checkers)?

``INSTRUCTIONS`` maps each IFEval instruction id to a checker; ``instructions_grader`` reads
``task.info["instructions"]`` and scores the fraction followed. Modes: ``strict`` (the response
as written) and ``loose`` (any of IFEval's 8 variants: without first/last line, ``*`` removed).
An unknown instruction id or bad kwargs is a grader error, never a 0.

Labeled suite: ``tests/suites/instructions.jsonl`` (``verigym verifier-bench --grader instructions``).

Inside: ``_checks`` (the checkers), ``_text`` (words, sentences, keywords), ``_lang`` (language
detection), ``_grader`` (re-exported here).
"""

from verigym.graders.instructions._grader import (
    INSTRUCTIONS,
    SUPPORTED_LANGUAGES,
    Checker,
    InstructionResult,
    bench_verdict,
    check_instruction,
    check_instructions,
    detect_language,
    instructions_from_info,
    instructions_grader,
    loose_variants,
)

__all__ = [
    "INSTRUCTIONS",
    "SUPPORTED_LANGUAGES",
    "Checker",
    "InstructionResult",
    "bench_verdict",
    "check_instruction",
    "check_instructions",
    "detect_language",
    "instructions_from_info",
    "instructions_grader",
    "loose_variants",
]
