"""Evaluation on top of ``verigym.runner``: the results store, metrics, the report and the run.

``verigym.eval.store`` (append-only JSONL with resume) and ``verigym.eval.metrics`` (pass@k,
bootstrap CIs, the summary) are small and import nothing heavy; ``verigym select`` reads stored
results through the store. The trainer never imports ``eval``: its held-out pass@1 comes from
``verigym._pass_at_k``, which ``metrics`` uses too. ``verigym.eval.workflow.evaluate`` (also ``verigym.evaluate``) is one whole
eval run — environment, tasks, policy, endpoint check, results — and what ``verigym eval`` calls;
``verigym.eval.run.evaluate`` is its last step (a run once all of those are in hand), which suites use.
The workflow names (``evaluate``, ``aevaluate``, ``EvalConfig``, ...) are imported when first asked for.
"""

from collections.abc import Callable
from typing import TYPE_CHECKING

from verigym._lazy import lazy_getattr
from verigym.eval.metrics import bootstrap_ci, pass_at_k, summarize
from verigym.eval.store import ResultsWriter, StoreError, load_records, prepare_resume

if TYPE_CHECKING:
    from verigym.eval.config import ConfigError, EvalConfig
    from verigym.eval.run import EvalResult
    from verigym.eval.workflow import EvalEvent, EvalSetupError, aevaluate, evaluate

__getattr__: Callable[[str], object] = lazy_getattr(
    __name__,
    {
        "ConfigError": "verigym.eval.config",
        "EvalConfig": "verigym.eval.config",
        "EvalResult": "verigym.eval.run",
        "EvalEvent": "verigym.eval.workflow",
        "EvalSetupError": "verigym.eval.workflow",
        "aevaluate": "verigym.eval.workflow",
        "evaluate": "verigym.eval.workflow",
    },
)


__all__ = [
    "ConfigError",
    "EvalConfig",
    "EvalEvent",
    "EvalResult",
    "EvalSetupError",
    "ResultsWriter",
    "StoreError",
    "aevaluate",
    "bootstrap_ci",
    "evaluate",
    "load_records",
    "pass_at_k",
    "prepare_resume",
    "summarize",
]
