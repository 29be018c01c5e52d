"""Fixtures for the gateway tests: a saved tiny model, its policy, a running ``Gateway`` over it, and one
torch thread per module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from verigym.gateway import Gateway
from verigym.policies.local import LocalPolicy


@pytest.fixture(scope="module", autouse=True)
def _one_torch_thread(one_torch_thread: None) -> None:
    """One torch thread for each module here (``tests/conftest.py``)."""


@pytest.fixture(scope="module")
def gateway(tiny_dir: Path) -> Iterator[Gateway]:
    with Gateway(LocalPolicy.from_pretrained(tiny_dir, device="cpu")) as gw:
        yield gw
