"""Scale-out: asynchronous off-policy RL, remote inference servers, Ray, multi-process training.

See ``docs/scaling.md``. ``AsyncRLTrainer`` runs generation up to ``max_staleness`` steps ahead of
training with importance correction; a ``Sampler`` decides where generation runs (in-process copy,
or OpenAI-compatible servers that receive new weights over HTTP).
"""

from verigym.scale.async_loop import AsyncRLTrainer, sample_version
from verigym.scale.correction import Correction, correct_rows, staleness_metrics
from verigym.scale.sampler import InProcessSampler, Sampler

__all__ = [
    "AsyncRLTrainer",
    "Correction",
    "InProcessSampler",
    "Sampler",
    "correct_rows",
    "sample_version",
    "staleness_metrics",
]
