"""Tool-call family: did an agent call the right tools with the right arguments, or reach the right state?

Modes, one grader each: ``toolcall_grader`` (BFCL-style AST match of the calls made against
allowed answers: names, required and unexpected parameters, types, value sets; parallel calls
order-free unless ``ordered=True``; ``strings="bfcl"`` compares strings with BFCL's documented
normalisation, punctuation and case ignored), ``final_state_grader`` (tau-bench style: replay the gold
actions on a fresh state and compare canonical hashes with the agent's final state) and
``required_outputs_grader`` (required outputs appear in the replies as whole tokens).

Labeled suite: ``tests/suites/toolcall.jsonl`` (``verigym verifier-bench --grader toolcall``;
``kind`` ``ast`` | ``state`` | ``outputs``).

Inside: ``_ast_match`` (call matching and type checks), ``_modes`` (the grader of each mode, replay and state hashing; re-exported here).
"""

from verigym.graders.toolcall import _modes
from verigym.graders.toolcall._modes import *  # noqa: F403 (the family's names, listed once in _modes.__all__)

__all__ = []
__all__ += _modes.__all__
