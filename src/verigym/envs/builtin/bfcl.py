"""The ``bfcl`` environment: the Berkeley Function Calling Leaderboard's AST categories (Python).

**Task.** One BFCL question (Patil et al. 2024, "The Berkeley Function Calling Leaderboard"):
the user's request and the function docs it may use. ``category`` picks the file:
``simple`` (one function, one call), ``multiple`` (several functions, one call), ``parallel``
(one function, several calls), ``parallel_multiple`` (several functions, several calls).

**Data.** By default the files shipped inside the ``bfcl-eval`` package
(``bfcl_eval/data/BFCL_v4_<category>.json`` and ``possible_answer/`` beside it; the package is
found without importing it, so its heavy dependencies need not be installed:
``pip install --no-deps bfcl-eval`` is enough). ``path=FILE`` reads a question file in the same
format (JSON Lines: ``{"id", "question": [[messages]], "function": [docs]}``) with its answers
in ``possible_answer/<same name>`` beside it, in ``answers=FILE``, or inline as a
``ground_truth`` field of each row.

**Harness.** Single turn with native tool calling: the function docs are offered as OpenAI tools
(BFCL types mapped to JSON Schema: ``dict`` → ``object``, ``float`` → ``number``, ``tuple`` →
``array``, ``any`` → untyped), names with dots renamed with underscores (``math.factorial`` →
``math_factorial``) as BFCL itself does for OpenAI-style APIs. Tools differ per task, so
``tool_schemas()`` is None and each episode offers its own.

**Grader.** ``graders.toolcall.toolcall_grader(strings="bfcl")``: BFCL's AST match — the calls
made (order-free) against the allowed values of ``possible_answer``, with BFCL's
documented string normalisation (punctuation, spaces and case ignored: "Seattle WA" ≡
"Seattle, WA") and its type rules (a string naming a variable where the doc declares another
type; int accepted for float). ``info["answers"]`` is public: BFCL's arguments are stated in
the question by design (the task is to extract them into a call).

The oracle calls each function with the first allowed value of every parameter; the null
policy answers in text without calling anything.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from verigym._files import read_jsonl
from verigym.envs._args import choice_arg
from verigym.envs.base import SingleTurnEnv
from verigym.envs.datasets import DatasetError
from verigym.envs.procedural import HandsOutTasks
from verigym.envs.registry import EnvArgError
from verigym.graders.toolcall import toolcall_grader
from verigym.policies.base import Policy
from verigym.policies.scripted import Reply, ScriptedPolicy
from verigym.rubric import Rubric
from verigym.types import Message, Sampling, Task, ToolCall, Trajectory

__all__ = ["CATEGORIES", "BfclEnv", "bfcl_data_dir", "load_bfcl", "to_openai_tool"]

CATEGORIES = {
    "simple": "BFCL_v4_simple_python.json",
    "multiple": "BFCL_v4_multiple.json",
    "parallel": "BFCL_v4_parallel.json",
    "parallel_multiple": "BFCL_v4_parallel_multiple.json",
}
_SCHEMA_TYPES = {"dict": "object", "float": "number", "tuple": "array", "integer": "integer",
                 "string": "string", "boolean": "boolean", "array": "array", "object": "object",
                 "number": "number"}  # fmt: skip


def bfcl_data_dir() -> Path | None:
    """``bfcl_eval/data`` of an installed ``bfcl-eval`` (found without importing it), else None."""
    try:
        spec = importlib.util.find_spec("bfcl_eval")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        data = Path(location) / "data"
        if data.is_dir():
            return data
    return None


def safe_name(name: str) -> str:
    """An OpenAI-compatible function name: dots become underscores."""
    return name.replace(".", "_")


def _schema(node: Any) -> Any:
    if not isinstance(node, Mapping):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type":
            mapped = _SCHEMA_TYPES.get(str(value))
            if mapped is not None:
                out["type"] = mapped
        elif key == "properties" and isinstance(value, Mapping):
            out["properties"] = {k: _schema(v) for k, v in value.items()}
        elif key == "items":
            out["items"] = _schema(value)
        elif key in ("description", "required", "enum", "default"):
            out[key] = value
    return out


def to_openai_tool(doc: Mapping[str, Any]) -> dict[str, Any]:
    """A BFCL function doc as an OpenAI tool schema (see the module docstring)."""
    params = _schema(doc.get("parameters") or {"type": "dict", "properties": {}})
    params.setdefault("type", "object")
    return {
        "type": "function",
        "function": {
            "name": safe_name(str(doc["name"])),
            "description": str(doc.get("description", "")),
            "parameters": params,
        },
    }


def _read_rows(path: Path) -> list[dict[str, Any]]:
    """JSON Lines (BFCL's files), or one JSON array."""
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}: invalid JSON ({exc.msg} at line {exc.lineno})") from None
        return [dict(r) for r in rows]
    out = []
    for where, row in read_jsonl(path, error=DatasetError):
        if not isinstance(row, dict):
            raise DatasetError(f"{where}: expected an object, got {type(row).__name__}")
        out.append(row)
    return out


def _rename_answer(answer: Any, where: str) -> dict[str, Any]:
    if not isinstance(answer, Mapping) or len(answer) != 1:
        raise DatasetError(f"{where}: each ground_truth entry must be {{function: {{param: [values]}}}}")
    ((name, params),) = answer.items()
    if not isinstance(params, Mapping):
        raise DatasetError(f"{where}: parameters of {name!r} must be an object")
    return {safe_name(str(name)): dict(params)}


def _task(row: Mapping[str, Any], truth: Any, where: str, source: Path) -> Task:
    for field in ("id", "question", "function"):
        if field not in row:
            raise DatasetError(f"{where}: missing field {field!r} (row has: {', '.join(map(str, row))})")
    turns = row["question"]
    if not isinstance(turns, list) or not turns or not isinstance(turns[0], list) or not turns[0]:
        raise DatasetError(f"{where}: field 'question' must be a list of turns, each a list of messages")
    try:
        prompt = tuple(Message(role=m["role"], content=m.get("content") or "") for m in turns[0])
    except Exception:
        raise DatasetError(f"{where}: field 'question' must hold messages with role and content") from None
    docs = row["function"]
    if isinstance(docs, Mapping):
        docs = [docs]
    if not isinstance(docs, list) or not all(isinstance(d, Mapping) and "name" in d for d in docs):
        raise DatasetError(f"{where}: field 'function' must be a list of function docs with a 'name'")
    names = [safe_name(str(d["name"])) for d in docs]
    if len(set(names)) != len(names):
        raise DatasetError(f"{where}: two functions share the name {names} once dots become underscores")
    if truth is None:
        raise DatasetError(f"{where}: no answer for id {row['id']!r} (inline 'ground_truth' or {source})")
    if not isinstance(truth, list):
        raise DatasetError(f"{where}: ground_truth must be a list of expected calls")
    functions = [{**d, "name": n} for d, n in zip(docs, names, strict=True)]
    info = {
        "answers": [_rename_answer(a, where) for a in truth],
        "functions": functions,
        "tools": [to_openai_tool(f) for f in functions],
        "bfcl_names": {n: str(d["name"]) for d, n in zip(docs, names, strict=True)},
    }
    return Task(id=str(row["id"]), prompt=prompt, info=info)


def load_bfcl(path: str | Path, answers: str | Path | None = None) -> list[Task]:
    """Tasks from a BFCL question file and its answers (see the module docstring)."""
    qpath = Path(path)
    if not qpath.is_file():
        raise DatasetError(f"{qpath}: no such file")
    rows = _read_rows(qpath)
    truth: dict[str, Any] = {}
    apath = Path(answers) if answers is not None else qpath.parent / "possible_answer" / qpath.name
    if answers is not None and not apath.is_file():
        raise DatasetError(f"{apath}: no such file")
    if apath.is_file():
        for i, r in enumerate(_read_rows(apath), start=1):
            if "id" not in r or "ground_truth" not in r:
                raise DatasetError(f"{apath}:{i}: expected fields 'id' and 'ground_truth'")
            truth[str(r["id"])] = r["ground_truth"]
    tasks = []
    for i, row in enumerate(rows, start=1):
        gold = row.get("ground_truth", truth.get(str(row.get("id"))))
        tasks.append(_task(row, gold, f"{qpath}:{i}", apath))
    return tasks


def _resolve(value: Any) -> Any:
    """A concrete value from BFCL's nested answer form (a dict maps each key to allowed values)."""
    if isinstance(value, Mapping):
        out = {}
        for key, options in value.items():
            chosen = [o for o in options if o != ""] if isinstance(options, list) else [options]
            if chosen:
                out[key] = _resolve(chosen[0])
        return out
    if isinstance(value, list):
        return [_resolve(v) for v in value]
    return value


def oracle_calls(task: Task) -> list[ToolCall]:
    """One call per expected answer: the first allowed value of each parameter the doc declares;
    an optional one (``""`` allowed) is left out unless the doc requires it."""
    docs = {str(d["name"]): d for d in task.info["functions"]}
    calls = []
    for i, answer in enumerate(task.info["answers"]):
        ((name, params),) = answer.items()
        schema = (docs.get(name) or {}).get("parameters") or {}
        props, required = schema.get("properties") or {}, schema.get("required") or []
        args = {}
        for key, options in params.items():
            chosen = [o for o in options if o != ""]
            if chosen and (key in required or ("" not in options and (not props or key in props))):
                args[key] = _resolve(chosen[0])
        calls.append(ToolCall(id=f"oracle-{i}", name=name, arguments=json.dumps(args)))
    return calls


class BfclEnv(HandsOutTasks, SingleTurnEnv):
    """BFCL's AST categories (Python): make the right function calls; BFCL's AST match grades them."""

    name = "bfcl"
    description = "BFCL function calling (simple/multiple/parallel/parallel_multiple); BFCL-mode AST match."
    public_info_keys = ("answers", "functions", "tools", "bfcl_names")

    def __init__(
        self,
        category: str = "simple",
        path: str | None = None,
        answers: str | None = None,
        system_prompt: str | None = None,
    ) -> None:
        self.category = choice_arg("bfcl", "category", category, tuple(CATEGORIES))
        if path is None:
            data = bfcl_data_dir()
            if data is None:
                raise EnvArgError(
                    "bfcl: bfcl-eval is not installed (pip install --no-deps bfcl-eval); "
                    "or give --env-arg path=QUESTIONS.json"
                )
            self._path = data / CATEGORIES[self.category]
        else:
            self._path = Path(path)
            if not self._path.is_file():
                raise EnvArgError(f"bfcl: path {path!r} is not a file")
        self._answers = answers
        self._tasks: list[Task] | None = None
        super().__init__(rubric=Rubric([toolcall_grader(strings="bfcl", name="bfcl_ast")]),
                         system_prompt=system_prompt)  # fmt: skip

    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        if split != "test":
            raise ValueError(f"bfcl has only a test split, not {split!r}")
        if self._tasks is None:
            self._tasks = load_bfcl(self._path, self._answers)
        out = self._tasks if n is None else self._tasks[:n]
        return self.hand_out(out)

    async def _loop(
        self, task: Task, policy: Policy, sampling: Sampling, trajectory: Trajectory, state: dict[str, Any]
    ) -> None:
        tools: Sequence[dict[str, Any]] = task.info["tools"]
        completion = await policy.complete(trajectory.messages, tools=tools, sampling=sampling)
        self.record_model_turn(trajectory, completion)
        trajectory.stop_reason = "length" if completion.finish_reason == "length" else "done"

    def oracle_policy(self) -> Policy:
        def solve(task: Task, messages: Sequence[Message]) -> Reply:
            return "", oracle_calls(task)

        return self.task_oracle(solve, name="bfcl-oracle")

    def null_policy(self) -> Policy:
        return ScriptedPolicy(lambda messages: "I would call a function here.", name="bfcl-null")
