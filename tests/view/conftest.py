"""The viewer's tests' run folders (``view_runs``): two eval runs on the same tasks, an agent-program
run, a training run, a select-style summary; and the viewer serving them on 127.0.0.1."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from view_runs import SCRIPT_REPLY, TASKS, record, train_run, write_eval


@pytest.fixture(scope="session")
def runs_dir(tmp_path_factory: pytest.TempPathFactory, tiny_dir: Path) -> Path:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tiny_dir / "tokenizer.json"))
    root = tmp_path_factory.mktemp("runs")
    model = root / "models" / "tiny"  # the tokenizer the sample page decodes token ids with
    model.mkdir(parents=True)
    shutil.copy(tiny_dir / "tokenizer.json", model / "tokenizer.json")
    # A passes tasks 0-7, B passes 0-3 and 8-11: tasks 4-7 go pass -> fail, 8-11 fail -> pass
    a = [record(t, k, int(t.split("-")[1]) < 8, tok) for t in TASKS for k in range(2)]
    b = [record(t, k, not 4 <= int(t.split("-")[1]) < 8, tok) for t in TASKS for k in range(2)]
    a[3] = record("calc-1", 1, True, tok, reply=SCRIPT_REPLY)
    b[-1] = record("calc-11", 1, None, tok)
    write_eval(root / "evals" / "before", a, Path("models/tiny"))
    write_eval(root / "evals" / "after", b, Path("models/tiny"))
    write_eval(root / "agent", [record(t, 0, True, tok, agent=True) for t in TASKS[:3]], Path("models/tiny"))
    train_run(root / "train")
    (root / "select").mkdir()
    (root / "select" / "summary.json").write_text(
        json.dumps(
            {
                "methods": {"majority": [{"n": 4, "accuracy": 0.5}]},
                "oracle_pass_at_n": [],
                "tasks": 12,
                "samples": 48,
            }
        )
    )
    return root


@pytest.fixture(scope="session")
def viewer(runs_dir: Path) -> Iterator[str]:
    """The viewer over ``runs_dir`` on a free 127.0.0.1 port; yields its base URL."""
    from verigym.view import start_viewer

    handle = start_viewer(runs_dir)
    yield handle.url
    handle.stop()
