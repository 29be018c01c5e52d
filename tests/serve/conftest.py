"""Fixtures for the ``verigym serve`` tests: a saved tiny model, and one torch thread per module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from verigym.policies import tiny


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny.create("tiny", tmp_path_factory.mktemp("tiny") / "model", seed=0)
