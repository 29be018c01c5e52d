"""Deprecated path, kept until verigym 0.3: chat rendering and tool-call formats moved with the
in-process engine to ``verigym.policies.local.chat``. Import them from there."""

import warnings

from verigym.policies.local.chat import *  # noqa: F403
from verigym.policies.local.chat import __all__ as __all__

warnings.warn(
    "verigym.policies.chat is deprecated and goes in verigym 0.3: import from verigym.policies.local.chat",
    DeprecationWarning,
    stacklevel=2,
)
