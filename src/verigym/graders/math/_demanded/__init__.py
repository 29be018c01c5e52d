"""The form a question demands ("simplest form", "common fraction", "to the nearest tenth"), checked
on how the answer is written before its value is compared (no sympy): ``_forms`` (the demand: phrases,
rules, their combination), ``_written`` (how an answer is written) and ``_writtenrules`` (the form
rules on it), ``_rounding`` (the reference rounded to the demanded places)."""
