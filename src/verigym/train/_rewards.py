"""Old private path of :mod:`verigym.train.rewards` (``train/rl.py`` still imports it; nothing else should)."""

from verigym.train.rewards import SUCCESS, Group, Sample, StepBatch, assign_advantages

__all__ = ["SUCCESS", "Group", "Sample", "StepBatch", "assign_advantages"]
