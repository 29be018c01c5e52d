"""Graders: the verifiers, one family per subpackage (or module, when it is one file).

Families (each with a labeled suite under ``tests/suites/`` and ``verigym verifier-bench --grader NAME``):

- ``math``: final-answer equivalence (extraction, LaTeX parser, timeout worker);
- ``code``: hidden tests in the bubblewrap ``code.sandbox``, and SWE-style repository grading
  (``code.swe``, the ``swe`` family); ``verigym.graders.sandbox`` and ``verigym.graders.swe`` are
  their old paths until verigym 0.3 (``verigym._deprecated``);
- ``instructions``: IFEval-style verifiable instructions;
- ``judge``: LLM rubric judge over any ``Policy``;
- ``toolcall``: BFCL-style call matching, final-state and required-output graders;
- ``schema``: structured output (JSON/YAML/TOML/CSV/XML) against a JSON Schema or expected fields;
- ``format``, ``length``, ``hacking``: answer parsers and format, length penalties, reward-hacking
  detectors (single modules);
- ``bench``: verifier-bench, the false-positive / false-negative measurement over a suite.

Each family's grader constructors are exported here too (``from verigym.graders import
math_grader``), imported when first asked for: ``import verigym.graders`` loads no family.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from verigym.graders.code import code_grader
    from verigym.graders.code.swe import swe_grader
    from verigym.graders.format import format_grader
    from verigym.graders.hacking import hacking_penalty
    from verigym.graders.instructions import instructions_grader
    from verigym.graders.judge import judge_grader
    from verigym.graders.length import max_length_grader, overlong_grader, token_cost_grader
    from verigym.graders.math import math_grader
    from verigym.graders.schema import fields_grader, schema_grader
    from verigym.graders.toolcall import final_state_grader, required_outputs_grader, toolcall_grader

_WHERE = {
    "code_grader": "code",
    "fields_grader": "schema",
    "final_state_grader": "toolcall",
    "format_grader": "format",
    "hacking_penalty": "hacking",
    "instructions_grader": "instructions",
    "judge_grader": "judge",
    "math_grader": "math",
    "max_length_grader": "length",
    "overlong_grader": "length",
    "required_outputs_grader": "toolcall",
    "schema_grader": "schema",
    "swe_grader": "code.swe",
    "token_cost_grader": "length",
    "toolcall_grader": "toolcall",
}

__all__ = [
    "code_grader",
    "fields_grader",
    "final_state_grader",
    "format_grader",
    "hacking_penalty",
    "instructions_grader",
    "judge_grader",
    "math_grader",
    "max_length_grader",
    "overlong_grader",
    "required_outputs_grader",
    "schema_grader",
    "swe_grader",
    "token_cost_grader",
    "toolcall_grader",
]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"verigym.graders.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'verigym.graders' has no attribute {name!r}")
