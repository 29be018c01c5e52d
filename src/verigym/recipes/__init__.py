"""Recipes: whole training runs with their settings chosen, built on ``verigym.train``'s public API.

- ``quickstart``: ``verigym quickstart``, the tiny model SFT'd then RL'd on ``arithmetic`` offline
  (``quickstart``, ``quickstart_config``; ``learning_run`` measures one seed's held-out pass@1 after
  each stage, for the learning tests and ``benchmarks/learning.py``; ``recipe_config`` is how every
  recipe turns its table and the caller's overrides into a ``TrainConfig``).
- ``quickstart_calc``: ``verigym quickstart --env calc``, an agent that learns to call a tool.
- ``quickstart_real``: ``verigym quickstart --model NAME``, the same recipes on a real pretrained model.

A recipe is settings plus a call to ``verigym.train``; the trainer never imports a recipe. The names
here are imported when first asked for (``import verigym.recipes`` loads no torch).
"""

from collections.abc import Callable
from typing import TYPE_CHECKING

from verigym._lazy import lazy_getattr

if TYPE_CHECKING:
    from verigym.recipes.quickstart import learning_run, quickstart, quickstart_config, recipe_config
    from verigym.recipes.quickstart_calc import calc_quickstart, calc_quickstart_config
    from verigym.recipes.quickstart_real import real_calc_config, real_quickstart_config

__getattr__: Callable[[str], object] = lazy_getattr(
    __name__,
    {
        "learning_run": "verigym.recipes.quickstart",
        "quickstart": "verigym.recipes.quickstart",
        "quickstart_config": "verigym.recipes.quickstart",
        "recipe_config": "verigym.recipes.quickstart",
        "calc_quickstart": "verigym.recipes.quickstart_calc",
        "calc_quickstart_config": "verigym.recipes.quickstart_calc",
        "real_calc_config": "verigym.recipes.quickstart_real",
        "real_quickstart_config": "verigym.recipes.quickstart_real",
    },
)

__all__ = [
    "calc_quickstart",
    "calc_quickstart_config",
    "learning_run",
    "quickstart",
    "quickstart_config",
    "real_calc_config",
    "real_quickstart_config",
    "recipe_config",
]
