"""verigym: post-training verifiable agents.

Environments (tasks + harness + rubric) run a ``Policy`` into ``Trajectory`` records scored
by a ``Rubric``; the same records feed evaluation, SFT data, RL and test-time selection.
``verigym.evaluate(env, model, ...)`` runs one eval from a script or notebook (``ModelSpec`` names the
model); ``verigym.load_env`` loads an environment.
"""

from collections.abc import Callable
from typing import TYPE_CHECKING

from verigym._deprecated import install as _answer_old_paths
from verigym._lazy import lazy_getattr
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
    from verigym.eval.config import EvalConfig
    from verigym.eval.workflow import aevaluate, evaluate
    from verigym.policies.spec import ModelSpec, make_policy

__version__ = "0.1.0"

_answer_old_paths()  # the moved modules' old paths (verigym._deprecated.ALIASES), with a warning

# Lazy: the registry (and any environment), the eval workflow and the model factory are imported only
# when asked for. ``verigym.eval`` is the subpackage; ``verigym.evaluate`` runs one eval.
__getattr__: Callable[[str], object] = lazy_getattr(
    __name__,
    {
        "load_env": "verigym.envs.registry",
        "evaluate": "verigym.eval.workflow",
        "aevaluate": "verigym.eval.workflow",
        "EvalConfig": "verigym.eval.config",
        "ModelSpec": "verigym.policies.spec",
        "make_policy": "verigym.policies.spec",
    },
)


__all__ = [
    "Completion",
    "Environment",
    "ErrorInfo",
    "EvalConfig",
    "Grade",
    "Grader",
    "GroupGrader",
    "Message",
    "ModelSpec",
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
    "aevaluate",
    "evaluate",
    "load_env",
    "make_policy",
    "sample",
]
