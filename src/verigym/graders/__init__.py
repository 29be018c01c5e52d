"""Graders: the verifiers, one family per subpackage (or module, when it is one file).

Families (each with a labeled suite under ``tests/suites/`` and ``verigym verifier-bench --grader NAME``):

- ``math``: final-answer equivalence (extraction, LaTeX parser, timeout worker);
- ``code``: hidden tests in the bubblewrap ``code.sandbox``, and SWE-style repository grading
  (``code.swe``); ``verigym.graders.sandbox`` and ``verigym.graders.swe`` are the same modules'
  public paths;
- ``instructions``: IFEval-style verifiable instructions;
- ``judge``: LLM rubric judge over any ``Policy``;
- ``toolcall``: BFCL-style call matching, final-state and required-output graders;
- ``schema``: structured output (JSON/YAML/TOML/CSV/XML) against a JSON Schema or expected fields;
- ``format``, ``length``, ``hacking``: answer parsers and format, length penalties, reward-hacking
  detectors (single modules);
- ``bench``: verifier-bench, the false-positive / false-negative measurement over a suite.
"""
