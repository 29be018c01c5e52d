r"""Math family: is the final answer of a response equivalent to the reference answer?

``check_equivalent(gold, pred)`` extracts the answer (``\boxed{}``, "the answer is", "Answer:", a bare
answer, the last math span), parses it into a value tree and compares it with the reference: exact
rationals, tolerant constants, expressions by structure then numeric sampling then ``simplify``,
equations, sets, intervals, matrices, units. ``math_grader`` wraps it as a ``Grader``.

Modes (per call, or per task via ``task.info["math_mode"]``): ``equivalent`` (default),
``simplest_form``, ``exact_decimal:N``, ``with_units``. The form a question demands ("simplest
form", "common fraction", "improper fraction", "mixed number", "rationalize the denominator",
"simplest radical form", "exact value", "as a decimal", "to the nearest tenth", ...) is read from
``question=`` and enforced on how the answer is written (``_demanded``; an explicit mode wins).
Each check runs in a persistent worker process with a hard timeout; a timeout or crash is an
errored verdict, never a rejection. Verdicts are cached, and common answers (numbers, fractions,
simple LaTeX, lists, tuples, intervals) are decided in the calling process by exact rational
arithmetic (``_exact_path``) or in floats with error bounds (``_float_path``), without sympy.

Labeled suites: ``tests/suites/math.jsonl`` and ``tests/suites/math_forms.jsonl`` (demanded forms;
``verigym verifier-bench --grader math``).

Inside, by evaluation path (each a private subpackage; ``_equivalence`` holds the public functions
re-exported here and decides which path answers):

- ``_shared``: what every path shares: ``_extract`` (finding the answer), ``_norm`` (LaTeX clean-up),
  ``_rules`` (extraction verdicts, readings), ``_matching`` (list/interval comparison, decimal
  roundings), ``_mode`` (mode names), ``_reader`` (the own LaTeX reader, no sympy), ``_cursor`` (the
  token cursor of the hand-written readers), ``_prose`` (prose references);
- ``_demanded``: the form a question demands: ``_forms`` (phrases, rules, combination), ``_written``
  and ``_writtenrules`` (how an answer is written, and the form rules on it), ``_rounding`` (the
  reference rounded to demanded places);
- ``_exact_path``: in-process, exact, no sympy: ``_rational`` (exact rational arithmetic),
  ``_exactnum`` (exact numbers and their decimal rules), ``_text`` (answers that are text on both
  sides);
- ``_float_path``: in-process, sampled in floats with error bounds, no sympy: ``_sampled`` (expressions,
  lists, tuples, sets, matrices and named values), ``_sampledexpr`` (one expression),
  ``_sampledcmp`` (the values' comparison), ``_intervals`` (unions of intervals), ``_bounded``
  (bounded floats);
- ``_sympy_path``: the full check in a timeout worker: ``_check`` (one full check), ``_parse`` (string to
  value tree), ``_values`` (the value types), ``_compare`` and ``_numeric`` (equivalence), ``_fast``
  (LaTeX to sympy without the slow ANTLR parser), ``_floats`` (float evaluation for numeric
  sampling), ``_worker`` (the timeout worker pool).
"""

from verigym.graders.math import _equivalence
from verigym.graders.math._equivalence import *  # noqa: F403 (the family's names, listed once in _equivalence.__all__)
from verigym.graders.math._shared._mode import MODES, parse_mode

__all__ = ["MODES", "parse_mode"]
__all__ += _equivalence.__all__
