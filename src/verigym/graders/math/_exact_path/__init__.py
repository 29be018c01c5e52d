"""The exact fast path, in the calling process and without sympy: ``_rational`` (common answers
decided by exact rational arithmetic), ``_exactnum`` (exact numbers as written and the full check's
decimal rules on them) and ``_text`` (answers that are text on both sides)."""
