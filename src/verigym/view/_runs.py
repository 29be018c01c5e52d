"""The viewer's one reader of run folders: which folders are runs, what each one is, and a sample as shown.

Everything the viewer knows about the files verigym writes is here, so a change of format is a change
of this module only. A folder under the runs directory is a run when it holds ``results.jsonl`` (an
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

from verigym.types import Record

__all__ = ["RunInfo", "describe", "discover", "read_json", "sample_view", "tool_schemas"]

RunInfo = dict[str, Any]
_SKIP = {"checkpoints", "__pycache__", "node_modules"}  # model folders are told by their files
_MAX_DEPTH = 4


def read_json(path: Path) -> Any:
    """A JSON file's value, None when it is missing, being written or not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _kind(folder: Path, names: set[str]) -> str | None:
    if "results.jsonl" in names:
        return "profile" if "profile.jsonl" in names else "eval"
    if "metrics.jsonl" in names or "train_config.json" in names:
        return "train"
    if "scorecard.json" in names:
        return "suite"
    if "summary.json" in names:
        summary = read_json(folder / "summary.json")
        if isinstance(summary, dict) and "paired_tasks" in summary:
            return "compare"
        if isinstance(summary, dict) and ("methods" in summary or "method" in summary):
            return "select"
        return "other"
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
        kind = _kind(folder, names)
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


def describe(run_id: str, kind: str, folder: Path) -> RunInfo:
    """One row of the run list: model, env, date, samples, reward, pass@k, errors, tokens, wall time.

    ``live`` is True while an eval has no summary yet (being written, or killed): its figures are then
    filled in from the index by the caller."""
    info: RunInfo = {"id": run_id, "kind": kind, "model": None, "env": None, "date": None, "n": None}
    info.update(reward=None, pass_at_k={}, errors=None, tokens=None, wall_s=None, live=False)
    info["reports"] = sorted(p.name for p in folder.glob("*.html"))
    summary = read_json(folder / "summary.json")
    summary = summary if isinstance(summary, dict) else {}
    if kind in ("eval", "profile"):
        config = read_json(folder / "config.json") or {}
        cfg = config.get("config", {}) if isinstance(config, dict) else {}
        info["model"] = cfg.get("model") or cfg.get("policy") or config.get("policy")
        info["env"] = cfg.get("env")
        info["date"] = (config.get("written_at") or "").replace("T", " ")[:16] or _date(
            folder / "results.jsonl"
        )
        info["threshold"] = _num(cfg.get("success_threshold")) or 1.0
        if not summary:
            info["live"] = True
        info["n"] = summary.get("n_samples")
        info["reward"] = _num(summary.get("reward_mean"))
        info["pass_at_k"] = {k: _num(v) for k, v in (summary.get("pass_at_k") or {}).items()}
        info["errors"] = summary.get("n_errors")
        info["tokens"] = summary.get("total_tokens")
        info["wall_s"] = _num(summary.get("wall_s"))
    elif kind == "train":
        config = read_json(folder / "train_config.json") or {}
        model = config.get("model") or {}
        info["model"] = model.get("path") or (f"{model.get('tiny') or 'tiny'} (fresh)" if model else None)
        info["env"] = ", ".join(str(e.get("name")) for e in config.get("envs") or []) or None
        info["date"] = _date(folder / "metrics.jsonl") or _date(folder)
        info["n"] = summary.get("steps")
        info["reward"] = _num(summary.get("pass_at_1_after_rl", summary.get("eval/pass_at_1")))
        info["pass_at_k"] = {"1": info["reward"]} if info["reward"] is not None else {}
        info["errors"] = summary.get("train_samples_errored")
        info["wall_s"] = _num(summary.get("wall_s"))
        info["live"] = not summary
    else:
        info["date"] = _date(folder / ("scorecard.json" if kind == "suite" else "summary.json"))
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
    """The tool schemas the run's environment offered (from its ``config.json``), or why they are absent."""
    config = read_json(folder / "config.json") or {}
    cfg = config.get("config", {}) if isinstance(config, dict) else {}
    if not cfg.get("env"):
        return None, "no config.json naming the environment"
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


def sample_view(line: bytes, folder: Path, root: Path) -> dict[str, Any]:
    """One sample as the page shows it: every message in order with its source, tool calls and the
    completion's per-token logprobs; the grader vector with details; tokens; the agent program's calls."""
    record = Record.model_validate_json(line)
    t = record.trajectory
    config = read_json(folder / "config.json") or {}
    model = (config.get("config", {}) if isinstance(config, dict) else {}).get("model")
    tokenizer = _model_tokenizer(str(model), folder, root) if model else None
    messages: list[dict[str, Any]] = [{"source": "prompt", **m.model_dump()} for m in t.prompt]
    call = 0
    for turn in t.turns:
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
        call += turn.completion is not None
    state = dict(t.state)
    calls = state.pop("calls", None)
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
