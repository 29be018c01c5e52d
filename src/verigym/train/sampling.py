"""Deprecated path, kept until verigym 0.3: the group filters moved to ``group_filters`` (dynamic
sampling's ``has_signal``, ``DifficultyTracker``) and the length shaping to ``shaping``
(``soft_overlong``, ``token_cost``, ``lead_length_rewards``). Import them from there."""

import warnings

from verigym.train.group_filters import DifficultyTracker, has_signal
from verigym.train.shaping import lead_length_rewards, soft_overlong, token_cost

warnings.warn(
    "verigym.train.sampling is deprecated and goes in verigym 0.3: import from "
    "verigym.train.group_filters (has_signal, DifficultyTracker) or verigym.train.shaping",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["DifficultyTracker", "has_signal", "lead_length_rewards", "soft_overlong", "token_cost"]
