"""The bubblewrap sandbox: lives in :mod:`verigym.graders.code.sandbox` (the code family); this public path stays."""

from verigym.graders.code.sandbox import (
    Limits,
    Sandbox,
    SandboxResult,
    SandboxUnavailable,
    kill_group,
    python_executable,
    random_uid,
    run_sandboxed,
    site_packages,
)

__all__ = [
    "Limits",
    "Sandbox",
    "SandboxResult",
    "SandboxUnavailable",
    "kill_group",
    "python_executable",
    "random_uid",
    "run_sandboxed",
    "site_packages",
]
