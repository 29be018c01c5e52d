"""What ``verigym.envs.remote`` asks a server before any episode: which protocol it speaks (``probe``),
its tasks (``list_tasks``), and the rubric that scores with the reward the server sent
(``ServerRubric``)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

import httpx

from verigym.envs._remote_wire import RemoteError, as_dict, describe, to_grades, to_messages
from verigym.envs.registry import EnvArgError, EnvError
from verigym.rubric import Rubric
from verigym.types import Grade, Score, Task, Trajectory

__all__: list[str] = []


@dataclass(frozen=True)
class Probe:
    """What the first server that answered said about itself."""

    protocol: str  # "openenv" or "ors"
    verigym: bool  # a verigym env-server (docs/envserver.md): whole views, scores, the answer tool, seeds
    env: str | None  # the environment's name on the server
    description: str
    action_field: str | None  # a foreign OpenEnv action's one string field


def _get(client: httpx.Client, url: str) -> Any:
    """The JSON of a GET, or None when the route is not there (any non-2xx, or not JSON)."""
    response = client.get(url)
    if response.status_code in (401, 403):
        raise EnvError(
            f"env-server {url}: HTTP {response.status_code}: the API key is missing or wrong (api_key_env=)"
        )
    if not response.is_success:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def _string_field(action: dict[str, Any]) -> str | None:
    props = as_dict(action.get("properties"))
    strings = [
        k for k, v in props.items() if isinstance(v, dict) and v.get("type") == "string" and k != "metadata"
    ]
    required = [k for k in strings if k in (action.get("required") or [])]
    if len(required) == 1:
        return str(required[0])
    return str(strings[0]) if len(strings) == 1 else None


def probe(
    urls: list[str], forced: str | None, env: str | None, headers: dict[str, str], timeout: float
) -> Probe:
    """Ask the servers in turn until one answers: ``GET /schema`` (OpenEnv), ``GET /list_environments``
    (ORS), ``GET /metadata``. ``EnvError`` (one line) when none answers or the protocol is missing."""
    failures = []
    with httpx.Client(headers=headers, timeout=timeout, trust_env=False) as client:
        for url in urls:
            try:
                schema = _get(client, f"{url}/schema")
                names = _get(client, f"{url}/list_environments")
                meta = _get(client, f"{url}/metadata") if isinstance(schema, dict) else None
            except (httpx.TransportError, OSError) as exc:
                failures.append(f"{url}: {describe(exc)}")
                continue
            break
        else:
            raise EnvError(f"cannot reach the env-server: {'; '.join(failures)}")
    openenv = isinstance(schema, dict) and isinstance(schema.get("action"), dict)
    ors = isinstance(names, list) and all(isinstance(n, str) for n in names)
    protocol = forced or ("openenv" if openenv else "ors" if ors else None)
    if protocol is None:
        raise EnvError(
            f"{url} speaks neither OpenEnv (GET /schema) nor the Open Reward Standard (GET /list_environments)"
        )
    if protocol == "ors" and not ors:
        raise EnvError(f"{url} has no ORS GET /list_environments: not an Open Reward Standard server")
    action = schema.get("action") if openenv else {}
    verigym = openenv and all(k in json.dumps(action) for k in ('"tool_calls"', '"content"')) and ors
    if env is not None and ors and env.lower() not in [n.lower() for n in names]:
        raise EnvArgError(f"env: {url} serves {names}, not {env!r}")
    name = env or (names[0] if ors and names else None) or (meta or {}).get("name")
    return Probe(
        protocol=protocol,
        verigym=verigym,
        env=name.lower() if isinstance(name, str) and ors else name,
        description=str((meta or {}).get("description") or ""),
        action_field=None if verigym else _string_field(action),
    )


def _reset_seed(seed: int, split: str, index: int) -> int:
    digest = hashlib.blake2b(f"{seed}\x1f{split}\x1f{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & 0x7FFFFFFF


def list_tasks(
    urls: list[str],
    info: Probe,
    headers: dict[str, str],
    n: int | None,
    seed: int,
    split: str,
    timeout: float,
    size: int,
) -> list[Task]:
    """The first ``n`` tasks of ``split``: from the server's task API (``/{env}/task_range``; ``seed`` sent
    to a verigym server), else ``n`` (all: ``size``) resets with seeds derived from ``(seed, split, i)``."""
    specs = _task_range(urls, info, headers, n, seed, split, timeout)
    if specs is None:
        return [
            Task(
                id=f"{split}-{seed}-{i}",
                prompt=(),
                info={"remote": {"reset_seed": _reset_seed(seed, split, i)}},
            )
            for i in range(size if n is None else min(n, size))
        ]
    tasks = []
    for i, spec in enumerate(specs):
        if not isinstance(spec, dict):
            raise RemoteError(f"task {i} of {split!r} is not a JSON object")
        index = spec.get("index", i) if info.verigym else i
        task_id = str(spec.get("id", f"{split}-{i}")) if info.verigym else f"{split}-{i}"
        prompt = (
            to_messages(spec["prompt"], f"task {task_id}: prompt")
            if isinstance(spec.get("prompt"), list)
            else []
        )
        ref = {
            "split": split,
            "seed": seed,
            "index": index,
            "id": task_id if info.verigym else None,
            "spec": spec,
        }
        tasks.append(Task(id=task_id, prompt=tuple(prompt), info={"remote": ref}))
    return tasks


def _task_range(
    urls: list[str],
    info: Probe,
    headers: dict[str, str],
    n: int | None,
    seed: int,
    split: str,
    timeout: float,
) -> list[Any] | None:
    if not info.env:
        return None
    body: dict[str, Any] = {"split": split, "start": 0}
    if n is not None:
        body["stop"] = n
    if info.verigym:
        body["seed"] = seed
    failures = []
    with httpx.Client(headers=headers, timeout=timeout, trust_env=False) as client:
        for url in urls:
            try:
                response = client.post(f"{url}/{info.env}/task_range", json=body)
            except (httpx.TransportError, OSError) as exc:
                failures.append(f"{url}: {describe(exc)}")
                continue
            if response.status_code in (404, 405, 501):
                return None  # no task API (a stock OpenEnv environment)
            if response.status_code == 400:
                raise ValueError(f"{url}: split {split!r}: {response.text[:200]}")
            if not response.is_success:
                failures.append(f"{url}: HTTP {response.status_code}")
                continue
            tasks = response.json().get("tasks")
            if not isinstance(tasks, list):
                raise RemoteError(f"{url}/{info.env}/task_range: no task list in the answer")
            return tasks
    raise ValueError(f"cannot list the tasks: {'; '.join(failures)}")


class ServerRubric(Rubric):
    """Scores with what the server sent: its reward (the sum of the rewards of the episode's steps) and its
    grader vector where it sent one (else one grade, ``reward``). An episode the server never rewarded
    scores 0 with a grade saying so; an errored one has no reward. Penalties added to the rubric
    (``[[rubric.penalties]]``) still apply."""

    def _combine(self, grades: dict[str, Grade], penalty: float, trajectory: Trajectory) -> Score:
        base = super()._combine(grades, penalty, trajectory)
        if base.error is not None:
            return base
        sent = to_grades(trajectory.state.get("grades")) or {}
        reward = trajectory.state.get("reward")
        if reward is None:
            sent = {"reward": Grade(score=0.0, detail="the server sent no reward"), **sent}
            reward = 0.0
        elif not sent:
            sent = {"reward": Grade(score=float(reward))}
        return Score(grades={**sent, **grades}, reward=float(reward) - penalty, penalty=penalty)
