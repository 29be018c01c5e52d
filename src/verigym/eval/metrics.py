"""Metrics over results records: unbiased pass@k, bootstrap confidence intervals, the summary.

The fold itself is written once, in ``verigym.record`` (eval, train's held-out eval and select all
use it); this module keeps the names ``verigym eval`` has always offered:

- ``pass_at_k(n, c, k)``: the unbiased estimator of Chen et al. 2021, "Evaluating Large
  Language Models Trained on Code" (arXiv:2107.03374), ``1 - C(n-c, k) / C(n, k)``, computed as a
  stable product (``verigym._pass_at_k``).
- ``bootstrap_ci``: a percentile bootstrap; with ``groups`` a cluster bootstrap over tasks.
- ``summarize``: the dict written to ``summary.json`` (without the run header).
- ``Aggregate``: the same summary gathered one record at a time.
"""

from __future__ import annotations

from verigym._pass_at_k import pass_at_k
from verigym.record import Aggregate, bootstrap_ci, summarize

__all__ = ["Aggregate", "bootstrap_ci", "pass_at_k", "summarize"]
