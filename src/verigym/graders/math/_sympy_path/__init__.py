"""The full check, on sympy, run in a worker process with a hard timeout: ``_check`` (one check:
extract, enforce the demanded form, parse, compare, apply the mode), ``_parse`` (answer string to
value tree), ``_values`` (the value types and the expression converter), ``_fast`` (LaTeX to sympy
through the own reader, without the slow ANTLR parser), ``_compare`` (equivalence of value trees),
``_numeric`` (numbers and expressions: exact, rounded, sampled), ``_floats`` (fast float evaluation
of sympy expressions for the sampling) and ``_worker`` (the pool of timeout worker processes)."""
