"""verigym: post-training verifiable agents.

Environments (tasks + harness + rubric) run a ``Policy`` into ``Trajectory`` records scored
by a ``Rubric``; the same records feed evaluation, SFT data, RL and test-time selection.
"""

from typing import TYPE_CHECKING

from verigym.envs.base import Environment, MultiTurnEnv, SingleTurnEnv
from verigym.policies.base import Policy, PolicyError, sample
from verigym.rubric import Grader, GroupGrader, Penalty, Rubric
from verigym.types import (
    Completion,
    ErrorInfo,
    Grade,
    Message,
    Record,
    Sampling,
    Score,
    Task,
    ToolCall,
    Trajectory,
    Turn,
    Usage,
)

if TYPE_CHECKING:
    from verigym.envs.registry import load_env

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # Lazy: the registry (and any environment) is imported only when asked for.
    if name == "load_env":
        from verigym.envs.registry import load_env

        return load_env
    raise AttributeError(f"module 'verigym' has no attribute {name!r}")


__all__ = [
    "Completion",
    "Environment",
    "ErrorInfo",
    "Grade",
    "Grader",
    "GroupGrader",
    "Message",
    "MultiTurnEnv",
    "Penalty",
    "Policy",
    "PolicyError",
    "Record",
    "Rubric",
    "Sampling",
    "Score",
    "SingleTurnEnv",
    "Task",
    "ToolCall",
    "Trajectory",
    "Turn",
    "Usage",
    "__version__",
    "load_env",
    "sample",
]
