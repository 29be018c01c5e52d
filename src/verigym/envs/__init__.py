"""Environments: the harness classes, the built-in collection and the registry.

Names are imported lazily, so ``import verigym.envs`` loads nothing but this file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from verigym._lazy import lazy_getattr

if TYPE_CHECKING:
    from verigym.envs.base import Environment, MultiTurnEnv, SingleTurnEnv
    from verigym.envs.check import CheckReport, check_env
    from verigym.envs.dataset_env import DatasetEnv
    from verigym.envs.datasets import DatasetError, from_records, load_jsonl, load_parquet, procedural_tasks
    from verigym.envs.registry import EnvArgError, UnknownEnvError, list_envs, load_env, register_env
    from verigym.envs.tool import ToolEnv

__all__ = [
    "CheckReport",
    "DatasetEnv",
    "DatasetError",
    "EnvArgError",
    "Environment",
    "MultiTurnEnv",
    "SingleTurnEnv",
    "ToolEnv",
    "UnknownEnvError",
    "check_env",
    "from_records",
    "list_envs",
    "load_env",
    "load_jsonl",
    "load_parquet",
    "procedural_tasks",
    "register_env",
]

__getattr__ = lazy_getattr(
    __name__,
    {
        "Environment": ".base",
        "MultiTurnEnv": ".base",
        "SingleTurnEnv": ".base",
        "CheckReport": ".check",
        "check_env": ".check",
        "DatasetEnv": ".dataset_env",
        "DatasetError": ".datasets",
        "from_records": ".datasets",
        "load_jsonl": ".datasets",
        "load_parquet": ".datasets",
        "procedural_tasks": ".datasets",
        "EnvArgError": ".registry",
        "UnknownEnvError": ".registry",
        "list_envs": ".registry",
        "load_env": ".registry",
        "register_env": ".registry",
        "ToolEnv": ".tool",
    },
)
