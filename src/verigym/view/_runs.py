"""The viewer's one reader of run folders: which folders are runs, what each one is, and a sample as shown.

Everything the viewer knows about the files verigym writes is here (with ``_train``'s training files), so a
change of format is a change of these modules only. A run's kind, header and typed summary come from
``verigym.record.read_run``; ``results.jsonl`` lines are ``verigym.types.Record``. A folder under the runs directory is a run when it holds ``results.jsonl`` (an
eval, or a profile beside ``profile.jsonl``), ``metrics.jsonl`` or ``train_config.json`` (training),
``scorecard.json`` (a suite) or a ``summary.json`` (select, compare, anything else; shown as its
summary). Model folders (``config.json`` beside weights) and checkpoints are not walked into.
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from verigym.record import EvalSummary, RunFormatError, SelectSummary, TrainSummary, read_header, read_run
from verigym.types import Record

__all__ = [
    "RunInfo",
    "describe",
    "discover",
    "read_json",
    "run_config",
    "sample_view",
    "summary_rows",
    "tool_schemas",
]

RunInfo = dict[str, Any]
_SKIP = {"checkpoints", "__pycache__", "node_modules"}  # model folders are told by their files
_MAX_DEPTH = 4


def read_json(path: Path) -> Any:
    """A JSON file's value, None when it is missing, being written or not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _kind(names: set[str]) -> str | None:
    """The page that shows a folder: ``eval`` (a results table), ``train`` (curves and steps),
    ``summary`` (a labelled summary), or None when it is not a run."""
    if "results.jsonl" in names:
        return "eval"
    if "metrics.jsonl" in names or "train_config.json" in names:
        return "train"
    if names & {"run.json", "scorecard.json", "summary.json", "profile.jsonl"}:
        return "summary"
    return None


def discover(root: Path) -> Iterator[tuple[str, str, Path]]:
    """``(run id, kind, folder)`` of each run under ``root`` (the id is its path from ``root``)."""
    for here, dirs, files in os.walk(root):
        folder = Path(here)
        depth = len(folder.relative_to(root).parts)
        names = set(files)
        if "config.json" in names and any(n.endswith((".safetensors", ".bin")) for n in names):
            dirs.clear()  # a model folder
            continue
        kind = _kind(names)
        if kind is not None:
            yield (folder.relative_to(root).as_posix() or ".", kind, folder)
        dirs[:] = (
            sorted(d for d in dirs if d not in _SKIP and not d.startswith(".")) if depth < _MAX_DEPTH else []
        )


def _date(path: Path) -> str | None:
    try:
        stamp = path.stat().st_mtime
    except OSError:
        return None
    return _dt.datetime.fromtimestamp(stamp, _dt.UTC).strftime("%Y-%m-%d %H:%M")


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def run_config(folder: Path) -> dict[str, Any]:
    """The run's resolved config: its header's (``run.json``, ``verigym.record``), else the files runs
    wrote before the record (``config.json``'s ``config``, ``train_config.json``)."""
    try:
        header = read_header(folder)
    except RunFormatError:
        header = None
    if header is not None and header.config:
        return dict(header.config)
    legacy = read_json(folder / "config.json")
    if isinstance(legacy, dict) and isinstance(legacy.get("config"), dict):
        return {
            **legacy["config"],
            "written_at": legacy.get("written_at"),
            "policy_label": legacy.get("policy"),
        }
    legacy = read_json(folder / "train_config.json")
    return legacy if isinstance(legacy, dict) else {}


def _model_label(cfg: dict[str, Any]) -> str | None:
    model = cfg.get("model")
    if isinstance(model, dict):  # a training config's [model] table
        return model.get("path") or f"{model.get('tiny') or 'tiny'} (fresh)"
    return model or cfg.get("policy") or cfg.get("policy_label")


def _env_label(cfg: dict[str, Any]) -> str | None:
    if isinstance(cfg.get("envs"), list):
        return ", ".join(str(e.get("name")) for e in cfg["envs"] if isinstance(e, dict)) or None
    return cfg.get("env")


def describe(run_id: str, view: str, folder: Path) -> RunInfo:
    """One row of the run list: kind, model, env, date, samples, reward, pass@k, errors, tokens, wall time.

    Read through ``verigym.record.read_run`` (the typed summary and header; runs written before the
    record included). ``view`` is the page that shows it (``eval``: a results table, ``train``, or a
    summary); ``live`` is True while the run has no summary (being written, or killed): an eval's
    figures are then filled in from its index by the caller. A folder ``read_run`` refuses (a newer
    format) is listed with its one-line reason in ``problem``."""
    info: RunInfo = {"id": run_id, "kind": view, "view": view, "model": None, "env": None, "date": None}
    info.update(n=None, reward=None, pass_at_k={}, errors=None, tokens=None, wall_s=None, live=False)
    info["reports"] = sorted(p.name for p in folder.glob("*.html"))
    info["threshold"] = 1.0
    try:
        record = read_run(folder)
    except RunFormatError as exc:
        info["problem"] = str(exc)
        return info
    cfg = run_config(folder)
    header, summary = record.header, record.summary
    info["kind"] = "profile" if (folder / "profile.jsonl").is_file() else record.kind
    info["model"], info["env"] = _model_label(cfg), _env_label(cfg)
    started = (header.started_at if header is not None else None) or cfg.get("written_at")
    info["date"] = str(started).replace("T", " ")[:16] if started else _date(folder)
    info["live"] = not record.finished
    info["wall_s"] = _num(summary.wall_s if summary is not None else None) or _num(
        header.wall_s if header is not None else None
    )
    if isinstance(summary, EvalSummary):
        info.update(n=summary.n_samples, reward=_num(summary.reward_mean), errors=summary.n_errors)
        info.update(tokens=summary.total_tokens, threshold=summary.success_threshold)
        info["pass_at_k"] = {k: _num(v) for k, v in summary.pass_at_k.items()}
    elif isinstance(summary, TrainSummary):
        after = summary.pass_at_1_after_rl if summary.pass_at_1_after_rl is not None else summary.pass_at_1
        info.update(
            n=summary.steps or summary.sft_steps, reward=_num(after), errors=summary.train_samples_errored
        )
        info["pass_at_k"] = {"1": info["reward"]} if info["reward"] is not None else {}
    elif isinstance(summary, SelectSummary):
        info.update(n=summary.samples, errors=summary.sample_errors)
        info["model"], info["env"] = (
            info["model"] or summary.model or None,
            info["env"] or summary.env or None,
        )
    if cfg.get("success_threshold") is not None:
        info["threshold"] = _num(cfg.get("success_threshold")) or 1.0
    return info


def summary_rows(folder: Path) -> list[tuple[str, str]]:
    """A run's ``summary.json`` (or ``scorecard.json``) as labelled rows, nested values as JSON text."""
    data = read_json(folder / "summary.json") or read_json(folder / "scorecard.json") or {}
    rows = []
    for key, value in data.items() if isinstance(data, dict) else ():
        label = key.replace("_", " ").replace("/", " / ")
        text = value if isinstance(value, str) else json.dumps(value)
        rows.append((label, text[:2000]))
    return rows


@functools.lru_cache(maxsize=16)
def _tokenizer(model: str) -> Any:
    path = Path(model).expanduser() / "tokenizer.json"
    if not path.is_file():
        return None
    try:
        from tokenizers import Tokenizer

        return Tokenizer.from_file(str(path))
    except Exception:  # a tokenizer file this library cannot read: logprobs are shown per token id
        return None


@functools.lru_cache(maxsize=32)
def _tool_schemas(env: str, args: str) -> tuple[str | None, str | None]:
    """``(schemas as JSON, why not)`` of a registered environment built with the run's arguments."""
    from verigym.envs.registry import list_envs, load_env

    if env not in list_envs():
        return None, f"{env!r} is not a registered environment (its tools are not loaded)"
    try:
        schemas = load_env(env, **json.loads(args)).tool_schemas()
    except Exception as exc:  # the env could not be built here: say so on the page
        return (
            None,
            f"could not build {env!r} to read its tools: {str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}",
        )
    return (json.dumps(schemas) if schemas else None), None


def tool_schemas(folder: Path) -> tuple[Any, str | None]:
    """The tool schemas the run's environment offered (built from its config), or why they are absent."""
    cfg = run_config(folder)
    if not isinstance(cfg.get("env"), str):
        return None, "no config naming the environment (run.json or config.json)"
    schemas, why = _tool_schemas(str(cfg["env"]), json.dumps(cfg.get("env_args") or {}, sort_keys=True))
    return (json.loads(schemas) if schemas else None), why


def _tokens(completion: Any, tokenizer: Any) -> list[dict[str, Any]] | None:
    ids, lps = completion.completion_token_ids, completion.logprobs
    if lps is None:
        return None
    out = []
    for i, lp in enumerate(lps):
        tid = ids[i] if ids is not None and i < len(ids) else None
        text = (
            tokenizer.decode([tid], skip_special_tokens=False)
            if tokenizer is not None and tid is not None
            else None
        )
        out.append({"id": tid, "text": text, "logprob": lp if math.isfinite(lp) else None})
    return out


def _model_tokenizer(model: str, folder: Path, root: Path) -> Any:
    """The tokenizer of the run's model: its path as given (from where the eval ran), else from the runs
    directory or the run's folder (a path written relative to them)."""
    for base in (None, root, folder):
        path = Path(model).expanduser() if base is None else base / model
        found = _tokenizer(str(path))
        if found is not None:
            return found
    return None


_ON_LINE = ("continue", "prefix_break")  # an agent program's call that goes on with its conversation


def _call_numbers(turns: Any, calls: Any) -> list[int]:
    """The gateway call index of each completion turn, in turn order. An agent program's trajectory
    holds its branch calls first, then its main conversation's (``agents``' trace): the main line is the
    lineage of ``continue``/``prefix_break`` calls back from the last call on the root's line, as the
    trace builds it. Without call labels (or when they do not fit): 0, 1, 2, ... in turn order."""
    n = sum(t.completion is not None for t in turns)
    try:
        labels = {int(c["call"]): (str(c["kind"]), c.get("parent")) for c in calls or ()}
        root_line: set[int] = set()
        for index in sorted(labels):
            kind, parent = labels[index]
            if kind == "root" or (kind in _ON_LINE and parent in root_line):
                root_line.add(index)
        line = [max(root_line)]
        while labels[line[-1]][1] is not None and labels[line[-1]][0] in _ON_LINE:
            line.append(int(labels[line[-1]][1]))
        line.reverse()
        branches = [i for i in sorted(labels) if i not in line]
        order = iter(branches + line)
        out = [next(order) for t in turns if t.completion is not None]
    except (KeyError, TypeError, ValueError, StopIteration, AttributeError):
        return list(range(n))
    return out if len(out) == n and len(labels) == n else list(range(n))


def sample_view(line: bytes, folder: Path, root: Path) -> dict[str, Any]:
    """One sample as the page shows it: every message in order with its source, tool calls and the
    completion's per-token logprobs; the grader vector with details; tokens; the agent program's calls."""
    record = Record.model_validate_json(line)
    t = record.trajectory
    model = run_config(folder).get("model")
    tokenizer = _model_tokenizer(model, folder, root) if isinstance(model, str) and model else None
    messages: list[dict[str, Any]] = [{"source": "prompt", **m.model_dump()} for m in t.prompt]
    state = dict(t.state)
    calls = state.pop("calls", None)
    numbers = iter(_call_numbers(t.turns, calls))
    for turn in t.turns:
        call = next(numbers) if turn.completion is not None else None
        for m in turn.messages:
            entry: dict[str, Any] = {"source": turn.source, **m.model_dump()}
            if turn.completion is not None:
                c = turn.completion
                entry.update(
                    call=call,
                    finish_reason=c.finish_reason,
                    usage=c.usage.model_dump(),
                    tokens=_tokens(c, tokenizer),
                    token_ids_exact=c.token_ids_exact,
                    policy_version=c.policy_version,
                )
            messages.append(entry)
    schemas, why = tool_schemas(folder)
    return {
        "env": record.env,
        "model": record.model,
        "task_id": record.task_id,
        "sample_index": record.sample_index,
        "sampling": record.sampling.model_dump(),
        "reward": record.score.reward,
        "penalty": record.score.penalty,
        "score_error": record.score.error,
        "error": None if record.error is None else record.error.model_dump(),
        "grades": [
            {"name": n, "score": None if g.error else g.score, "detail": g.detail, "error": g.error}
            for n, g in record.score.grades.items()
        ],
        "usage": record.usage.model_dump(),
        "wall_s": record.wall_s,
        "stop_reason": t.stop_reason,
        "messages": messages,
        "calls": calls,
        "state": state,
        "tool_schemas": schemas,
        "tool_schemas_note": why,
        "tokens_decoded": tokenizer is not None,
    }
