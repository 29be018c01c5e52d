"""The bubblewrap sandbox: lives in :mod:`verigym.graders.code.sandbox` (the code family); this
public path stays."""

from verigym.graders.code.sandbox import *  # noqa: F403 (every name of code.sandbox's __all__)
from verigym.graders.code.sandbox import __all__ as __all__
