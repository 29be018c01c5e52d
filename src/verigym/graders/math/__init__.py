r"""Math family: is the final answer of a response equivalent to the reference answer?

``check_equivalent(gold, pred)`` extracts the answer (``\boxed{}``, "the answer is", "Answer:", a bare
answer, the last math span), parses it into a value tree and compares it with the reference: exact
rationals, tolerant constants, expressions by structure then numeric sampling then ``simplify``,
equations, sets, intervals, matrices, units. ``math_grader`` wraps it as a ``Grader``.

Modes (per call, or per task via ``task.info["math_mode"]``): ``equivalent`` (default),
``simplest_form``, ``exact_decimal:N``, ``with_units``. The form a question demands ("simplest
form", "common fraction", "improper fraction", "mixed number", "rationalize the denominator",
"simplest radical form", "exact value", "as a decimal", "to the nearest tenth", ...) is read from
``question=`` and enforced on how the answer is written (``_forms``; an explicit mode wins).
Each check runs in a persistent worker process with a hard timeout; a timeout or crash is an
errored verdict, never a rejection. Verdicts are cached, and common answers (numbers, fractions,
simple LaTeX, lists, tuples, intervals) are decided in the calling process by exact rational
arithmetic (``_rational``), without sympy.

Labeled suites: ``tests/suites/math.jsonl`` and ``tests/suites/math_forms.jsonl`` (demanded forms;
``verigym verifier-bench --grader math``).

Inside: ``_extract`` (finding the answer), ``_norm`` (LaTeX clean-up), ``_parse`` (the parser:
string to value tree), ``_values`` (the value types), ``_compare`` and ``_numeric`` (equivalence),
``_check`` (one full check), ``_rational`` (the exact fast path), ``_rules`` (the rules both paths
share: extraction verdicts, readings, list/interval comparison, decimal roundings), ``_mode`` (mode
names), ``_reader`` (the own LaTeX reader, no sympy), ``_fast`` (its code on sympy: LaTeX to sympy
without the slow ANTLR parser), ``_floats`` (float evaluation for numeric sampling), ``_sampled`` and
``_bounded`` (the float path: expressions, lists, tuples, sets, matrices and named values compared
in floats with error bounds, no sympy; ``_sampledexpr`` one expression, ``_sampledcmp`` the values'
comparison, ``_intervals`` unions of intervals), ``_exactnum`` (exact numbers and the decimal rules
of the exact path), ``_text`` (answers that are text on both sides, no sympy), ``_prose`` (prose
references), ``_forms`` (the demanded form: phrases, rules, combination), ``_written`` and
``_writtenrules`` (how an answer is written, and the form rules on it), ``_rounding`` (the
reference rounded to demanded places), ``_worker`` (the timeout worker pool), ``_grader`` (the
public functions re-exported here).
"""

from verigym.graders.math import _grader
from verigym.graders.math._grader import *  # noqa: F403 (the family's names, listed once in _grader.__all__)
from verigym.graders.math._mode import MODES, parse_mode

__all__ = ["MODES", "parse_mode"]
__all__ += _grader.__all__
