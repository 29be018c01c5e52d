"""Deprecated path, kept until verigym 0.3: this module moved to ``verigym.envs.prepare`` (what a
config or the command line adds to any environment). Import from there."""

import warnings

from verigym.envs.prepare import add_penalties, attach_mcp, close_servers, prepare_env

warnings.warn(
    "verigym.envs.extras is deprecated and goes in verigym 0.3: import from verigym.envs.prepare",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["add_penalties", "attach_mcp", "close_servers", "prepare_env"]
