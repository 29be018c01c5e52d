"""What every path of the math check shares (no sympy at import): ``_norm`` (LaTeX and string
clean-up), ``_extract`` (finding the final answer in a response), ``_rules`` (the rules for reading
an answer that both the in-process paths and the full check apply: extraction verdicts, readings),
``_matching`` (how the values read compare: lists, intervals, matrices, decimal roundings),
``_mode`` (strictness mode names), ``_reader`` (the own LaTeX reader: LaTeX to expression code,
evaluated on sympy by ``_sympy_path._fast`` and on bounded floats by ``_float_path``), ``_cursor``
(the token cursor of the hand-written readers) and ``_prose`` (when a short answer is what a
reference sentence states)."""
