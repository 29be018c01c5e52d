"""SWE-style repository grading: lives in :mod:`verigym.graders.code.swe` (the code family); this
public path stays, and is where the ``swe`` grader family is found (``families.find_family``)."""

from verigym.graders.code.swe import *  # noqa: F403 (every name of code.swe's __all__)
from verigym.graders.code.swe import __all__ as __all__
