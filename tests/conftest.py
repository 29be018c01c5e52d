"""Suite-wide: a deprecation that transformers, torch or peft raise on verigym's own call fails the test,
in this process and in every CLI or server process a test starts (they inherit the variable)."""

from __future__ import annotations

import os

import pytest

from verigym._library_output import STRICT_ENV, strict_deprecations


def pytest_configure(config: pytest.Config) -> None:
    os.environ[STRICT_ENV] = "1"
    strict_deprecations()
