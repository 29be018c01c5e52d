"""Code family: does a candidate program pass hidden tests when run in a sandbox?

``code_grader`` runs the last fenced Python block of the answer in a bubblewrap sandbox
(``sandbox``: no network, read-only allow-list of the host, rlimits, cgroups where available) and
scores the fraction of hidden tests passed (``mode="fraction"``) or 1/0 when all pass
(``mode="all"``). Function problems: the tests run as plain Python in the grader's process (every
top-level ``assert`` a case, or HumanEval's ``check(candidate)`` called once, verbatim) against a
proxy of the sandboxed candidate (``_tests``, ``_session``, ``_worker``, ``_codec``); the boundary
keeps the tests' meaning (candidate-raised ``StopIteration`` and argument aliasing cannot change
it) and lets large results, deep data, iterators and ``multiprocessing`` through. Stdin/stdout problems (``task.info["io_tests"]``) compare
output line-wise, exactly (``exact_output``) or with a float tolerance (``float_tol``).
``swe.swe_grader`` grades repository tasks SWE-bench style: apply the patch, reset protected
files, run FAIL_TO_PASS / PASS_TO_PASS with pytest in the sandbox (``patch``, ``_pytest_run``).
A missing sandbox is an errored grade; ``unsafe_no_sandbox=True`` must be chosen explicitly.

Labeled suites: ``tests/suites/code.jsonl``, ``tests/suites/code_hostile.jsonl`` and
``tests/suites/code_adversarial.jsonl`` (boundary attacks and correct-but-unusual code; ``--grader
code``), ``tests/suites/code_swe.jsonl`` (``--grader swe``).

Inside: ``sandbox`` (the bwrap sandbox; ``verigym.graders.sandbox`` until verigym 0.3),
``_sandbox_io`` (limits, staging, output collection), ``_cgroup``, ``_audit`` (sandbox event
log), ``_pool`` (warm pre-started workers), ``_session`` (one sandboxed worker per candidate),
``_worker`` + ``_codec`` (the stdlib-only program inside the sandbox and its wire format),
``_tests`` (hidden-test evaluation), ``swe`` (the ``swe`` family; ``verigym.graders.swe`` until 0.3), ``patch``
(unified diffs; public, the repo-fix graders and ``hacking`` use it), ``_pytest_run`` (the in-sandbox pytest runner), ``_runner`` (the candidate run against function or
stdin/stdout tests, case limits, output comparison), ``_execution`` (the grader and its bench hooks;
its ``__all__``, which names the runner's results and functions too, is re-exported here).
"""

from verigym.graders.code import _execution
from verigym.graders.code._execution import *  # noqa: F403 (the family's names, listed once in _execution.__all__)

__all__ = []
__all__ += _execution.__all__
