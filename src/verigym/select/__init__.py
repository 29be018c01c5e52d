"""Test-time selection: pick one answer among N samples of a task.

* ``majority``: majority and weighted vote (deterministic tie-breaking).
* ``best_of_n``: the highest-scored sample under a Grader or a reward-model Policy.
* ``deepconf``: confidence-filtered voting (offline) and ``OnlineDeepConf``, an early-stop
  hook that ends low-confidence traces during generation (Fu et al. 2025).
* ``genselect``: a selector model compares up to 8 solutions at once, in a knockout
  tournament (Toshniwal et al. 2025); ``genselect.pick`` also chooses SFT demonstrations.
* ``methods``: the ``Selector`` protocol ``(task, candidates, ctx) -> Selection`` and the one
  registry of methods (``register_method``) that ``verigym select`` and ``run`` read; each
  built-in registers itself in its own module, and importing this package imports them all.
* ``run``: the experiment behind ``verigym select`` (accuracy vs samples and tokens).
* ``workflow``: the whole of ``verigym select`` as a library call, ``run_selection(env, model, config,
  ...)`` (and ``arun_selection``): environment, tasks, model, judge, endpoint check and the experiment,
  progress as ``SelectEvent``s, setup problems as one-line ``SelectSetupError``s. Imported when first
  asked for (it brings the runner and the model opener).
"""

from typing import TYPE_CHECKING

from verigym._lazy import lazy_getattr
from verigym.select._common import Candidate, Selection, answer_key, normalize_answer, register_answer_parser
from verigym.select._confidence import TraceScore
from verigym.select.best_of_n import select_best_of_n_grader, select_best_of_n_reward_model
from verigym.select.deepconf import OnlineDeepConf, select_deepconf, select_online
from verigym.select.genselect import pick, select_genselect
from verigym.select.majority import Vote, majority_vote, select_majority, weighted_vote
from verigym.select.methods import (
    METHODS,
    Method,
    SelectConfig,
    SelectContext,
    Selector,
    _register_builtins,
    get_method,
    method_names,
    register_method,
)

if TYPE_CHECKING:
    from verigym.select.workflow import SelectEvent, SelectSetupError, arun_selection, run_selection

__getattr__ = lazy_getattr(
    __name__,
    dict.fromkeys(("SelectEvent", "SelectSetupError", "arun_selection", "run_selection"), ".workflow"),
)

__all__ = [
    "METHODS",
    "Candidate",
    "Method",
    "OnlineDeepConf",
    "SelectConfig",
    "SelectContext",
    "SelectEvent",
    "SelectSetupError",
    "Selection",
    "Selector",
    "TraceScore",
    "Vote",
    "answer_key",
    "arun_selection",
    "get_method",
    "majority_vote",
    "method_names",
    "normalize_answer",
    "pick",
    "register_answer_parser",
    "register_method",
    "run_selection",
    "select_best_of_n_grader",
    "select_best_of_n_reward_model",
    "select_deepconf",
    "select_genselect",
    "select_majority",
    "select_online",
    "weighted_vote",
]

_register_builtins()  # last: every built-in method module (select.methods), whatever was imported above
