"""Library output: deprecations on verigym's own calls fail the suite; CLI runs keep library lines in a log."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from verigym._library_output import STRICT_ENV, strict_deprecations


def _model() -> Any:
    config = LlamaConfig(
        hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, vocab_size=50,
    )  # fmt: skip
    return LlamaForCausalLM(config)


def _call_as(module: str, model: Any) -> None:
    """Call ``model`` with the deprecated ``past_key_values`` from a frame that belongs to ``module``."""
    code = "def call(m, ids):\n    return m(input_ids=ids, past_key_values=None)\n"
    namespace: dict[str, Any] = {"__name__": module}
    exec(compile(code, f"<{module}>", "exec"), namespace)
    namespace["call"](model, torch.tensor([[1, 2]]))


def test_a_deprecation_on_verigyms_own_call_is_an_error() -> None:
    strict_deprecations()  # the suite's conftest installed it already; calling again changes nothing
    model = _model()
    with pytest.raises(FutureWarning, match="verigym calls a deprecated API: `past_key_values`"):
        _call_as("verigym._probe", model)


def test_a_libraries_own_deprecations_stay_warnings() -> None:
    model = _model()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _call_as("peft._probe", model)  # peft calling transformers: peft's business, not an error here
    assert any(issubclass(w.category, FutureWarning) for w in seen)


_SCRIPT = """
import sys, warnings
from verigym._library_output import capture, to_run_dir
capture("probe", verbose="--verbose" in sys.argv)
warnings.warn("a library warning", UserWarning)
from transformers.utils import logging
logging.get_logger("transformers.probe").warning("a transformers log line")
to_run_dir(sys.argv[1])
print("own output")
"""


@pytest.mark.parametrize("verbose", [False, True])
def test_cli_runs_keep_library_lines_in_the_run_log(tmp_path: Path, verbose: bool) -> None:
    run = tmp_path / "run"
    args = [sys.executable, "-c", _SCRIPT, str(run), *(["--verbose"] if verbose else [])]
    env = {"PATH": "/usr/bin:/bin", "VERIGYM_HOME": str(tmp_path / "home"), STRICT_ENV: "0"}
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "own output\n"
    log = (run / "library.log").read_text()
    assert "a library warning" in log and "a transformers log line" in log
    shown = "a library warning" in done.stderr and "a transformers log line" in done.stderr
    assert shown == verbose, done.stderr
