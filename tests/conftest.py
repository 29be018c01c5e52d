"""Suite-wide: a deprecation that transformers, torch or peft raise on verigym's own call fails the test,
in this process and in every CLI or server process a test starts (they inherit the variable). Shared
fixtures: a saved tiny model (``tiny_dir``) and one torch thread for a module (``one_torch_thread``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from verigym._library_output import STRICT_ENV, strict_deprecations


def pytest_configure(config: pytest.Config) -> None:
    os.environ[STRICT_ENV] = "1"
    strict_deprecations()


@pytest.fixture(scope="module")
def one_torch_thread() -> Iterator[None]:
    """Sub-million-parameter models only lose from intra-op threads (barrier waits on a busy machine);
    the previous setting is restored after the module, so other test areas are unaffected."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved tiny model directory (``verigym.policies.tiny``, seed 0)."""
    from verigym.policies import tiny

    return tiny.create("tiny", tmp_path_factory.mktemp("tiny") / "model", seed=0)
