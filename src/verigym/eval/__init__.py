"""Evaluation on top of ``verigym.runner``: the results store, metrics, the report and the run.

``verigym.eval.store`` (append-only JSONL with resume) and ``verigym.eval.metrics`` (pass@k,
bootstrap CIs, the summary) are small and import nothing heavy; the trainer, data and select
code use them directly. ``verigym.eval.run.evaluate`` is what ``verigym eval`` runs.
"""

from verigym.eval.metrics import bootstrap_ci, pass_at_k, summarize
from verigym.eval.store import ResultsWriter, StoreError, load_records, prepare_resume

__all__ = [
    "ResultsWriter",
    "StoreError",
    "bootstrap_ci",
    "load_records",
    "pass_at_k",
    "prepare_resume",
    "summarize",
]
