"""Fixtures for the agent-program tests: one torch thread per module (the tiny model is ``tiny_dir``)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread(one_torch_thread: None) -> None:
    """One torch thread for each module here (``tests/conftest.py``)."""
