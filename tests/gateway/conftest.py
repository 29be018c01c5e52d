"""Fixtures for the gateway tests: a saved tiny model, its policy, a running ``Gateway`` over it, and one
torch thread per module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from verigym.gateway import Gateway
from verigym.policies import tiny
from verigym.policies.local import LocalPolicy


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread() -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny.create("tiny", tmp_path_factory.mktemp("tiny") / "model", seed=0)


@pytest.fixture(scope="module")
def gateway(tiny_dir: Path) -> Iterator[Gateway]:
    with Gateway(LocalPolicy.from_pretrained(tiny_dir, device="cpu")) as gw:
        yield gw
