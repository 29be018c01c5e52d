"""The user's agent program, unmodified, in either form, and running it once per rollout.

- **A Python callable** ``agent(task: AgentTask, client: openai.AsyncOpenAI) -> str`` (async or plain),
  named ``FILE.py:FUNC`` or ``module:FUNC``. ``client`` already points at the rollout's gateway URL;
  ``task`` holds the prompt messages, the tool schemas and the environment's tools as Python callables.
- **A command**, run once per rollout with ``OPENAI_BASE_URL``, ``OPENAI_API_KEY`` (and, for Anthropic
  clients, ``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_API_KEY``) set for the rollout, ``VERIGYM_SESSION_ID``,
  and the task as JSON on stdin (``{"id", "messages", "tools", "info"}``). When the environment has
  tools, ``VERIGYM_MCP_URL`` is the rollout's MCP server (streamable HTTP, on the gateway at
  ``/sessions/{id}/mcp``): ``tools/list`` gives the environment's tool schemas, ``tools/call`` runs a
  tool as the environment does, with the rollout's state (``Error: ...`` text, ``isError`` set, on a
  failure). Its answer is its stdout, or the file it names in ``VERIGYM_ANSWER_FILE`` when it writes one.

A program that raises, exits non-zero, runs past its wall-clock limit, or never calls the model fails
with ``AgentError`` (the reason: the exception, the exit code and the tail of stderr, the limit): an
error, never a zero.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import inspect
import json
import os
import shlex
import sys
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["AgentError", "AgentProgram", "AgentTask", "CallableProgram", "CommandProgram", "load_program"]

_STDERR_TAIL = 800  # characters of a failed command's stderr kept in its error


class AgentError(Exception):
    """The agent program failed; ``kind`` is ``crash``, ``exit``, ``timeout`` or ``silent``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class AgentTask:
    """What a program gets for one rollout: the prompt (OpenAI messages), the tools as schemas and as
    Python callables (``tools``: name → function; ``call_tool`` runs one as the environment does), the
    task's public info, and ``mcp_url``: the same tools as the rollout's MCP server (set for a rollout
    whose environment has tools; a command gets it as ``VERIGYM_MCP_URL``)."""

    id: str
    messages: list[dict[str, Any]]
    tool_schemas: list[dict[str, Any]] | None
    info: dict[str, Any] = field(default_factory=dict)
    tools: dict[str, Callable[..., Any]] = field(default_factory=dict)
    runner: Callable[[str, str], Awaitable[str]] | None = None
    mcp_url: str | None = None

    async def call_tool(self, name: str, arguments: Mapping[str, Any] | str) -> str:
        """Run the environment's tool ``name`` as the environment would: an unknown tool, arguments that
        are not a JSON object or that fail its schema, and the tool's own failure come back as
        ``Error: ...`` text for the model, as in the environment's own harness."""
        if self.runner is None:
            raise RuntimeError("this environment has no tools")
        return await self.runner(
            name, arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
        )

    def as_json(self) -> dict[str, Any]:
        return {"id": self.id, "messages": self.messages, "tools": self.tool_schemas, "info": self.info}


class AgentProgram:
    """One of the two forms; ``run`` returns the program's answer or raises ``AgentError``."""

    label = ""

    async def run(
        self, task: AgentTask, base_url: str, api_key: str, session_id: str, timeout_s: float
    ) -> str:
        raise NotImplementedError


class CallableProgram(AgentProgram):
    def __init__(self, fn: Callable[..., Any], label: str) -> None:
        self.fn, self.label = fn, label

    async def run(
        self, task: AgentTask, base_url: str, api_key: str, session_id: str, timeout_s: float
    ) -> str:
        import openai

        client = openai.AsyncOpenAI(base_url=base_url, api_key=api_key, timeout=timeout_s)
        try:
            if inspect.iscoroutinefunction(self.fn):
                answer = await asyncio.wait_for(self.fn(task, client), timeout_s)
            else:
                answer = await asyncio.wait_for(asyncio.to_thread(self.fn, task, client), timeout_s)
        except TimeoutError:
            raise AgentError("timeout", f"agent {self.label} ran past its {timeout_s:g} s limit") from None
        except (SystemExit, KeyboardInterrupt) as exc:
            raise AgentError("crash", f"agent {self.label} raised {type(exc).__name__}") from None
        except Exception as exc:  # the program's own failure: its reason is the error
            raise AgentError("crash", f"agent {self.label} raised {type(exc).__name__}: {exc}") from None
        finally:
            await client.close()
        return "" if answer is None else str(answer)


class CommandProgram(AgentProgram):
    def __init__(self, command: str) -> None:
        self.argv = shlex.split(command)
        if not self.argv:
            raise ValueError("--agent-cmd: empty command")
        self.label = command

    async def run(
        self, task: AgentTask, base_url: str, api_key: str, session_id: str, timeout_s: float
    ) -> str:
        with tempfile.TemporaryDirectory(prefix="verigym-agent-") as tmp:
            answer_file = Path(tmp) / "answer.txt"
            env = {
                **os.environ,
                "OPENAI_BASE_URL": base_url,
                "OPENAI_API_KEY": api_key,
                "ANTHROPIC_BASE_URL": base_url.removesuffix("/v1"),
                "ANTHROPIC_API_KEY": api_key,
                "VERIGYM_SESSION_ID": session_id,
                "VERIGYM_ANSWER_FILE": str(answer_file),
            }
            if task.mcp_url:
                env["VERIGYM_MCP_URL"] = task.mcp_url
            try:
                proc = await asyncio.create_subprocess_exec(
                    *self.argv,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    env=env,
                    start_new_session=True,
                )
            except OSError as exc:
                raise AgentError("crash", f"agent command {self.argv[0]!r} could not start: {exc}") from None
            try:
                out, err = await asyncio.wait_for(
                    proc.communicate(json.dumps(task.as_json()).encode()), timeout_s
                )
            except TimeoutError:
                _kill(proc)
                await proc.wait()
                raise AgentError(
                    "timeout", f"agent command ran past its {timeout_s:g} s limit; killed"
                ) from None
            except asyncio.CancelledError:
                _kill(proc)
                raise
            if proc.returncode != 0:
                tail = err.decode(errors="replace").strip()[-_STDERR_TAIL:]
                raise AgentError(
                    "exit", f"agent command exited with {proc.returncode}; stderr: {tail or '(empty)'}"
                )
            if answer_file.exists():
                return answer_file.read_text()
            return out.decode(errors="replace").strip()


def _kill(proc: asyncio.subprocess.Process) -> None:
    import contextlib
    import signal

    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # the whole group: a shell's children too


def load_program(agent: str | Callable[..., Any] | None = None, agent_cmd: str | None = None) -> AgentProgram:
    """The program named by ``--agent FILE.py:FUNC`` / ``module:FUNC`` (or a callable) or ``--agent-cmd``.

    Raises ``ValueError`` with one line naming the flag when it cannot be found."""
    if (agent is None) == (agent_cmd is None):
        raise ValueError("give one of --agent FILE.py:FUNC and --agent-cmd 'COMMAND'")
    if agent_cmd is not None:
        return CommandProgram(agent_cmd)
    if callable(agent):
        return CallableProgram(agent, getattr(agent, "__qualname__", repr(agent)))
    assert isinstance(agent, str)
    where, sep, name = agent.rpartition(":")
    if not sep or not where or not name:
        raise ValueError(f"--agent {agent!r}: expected FILE.py:FUNC or module:FUNC")
    if where.endswith(".py"):
        path = Path(where)
        if not path.is_file():
            raise ValueError(f"--agent {agent!r}: no file {where}")
        spec = importlib.util.spec_from_file_location(f"verigym_agent_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise ValueError(f"--agent {agent!r}: cannot import {where}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    else:
        try:
            module = importlib.import_module(where)
        except ImportError as exc:
            raise ValueError(f"--agent {agent!r}: cannot import {where}: {exc}") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ValueError(f"--agent {agent!r}: {where} has no function {name}")
    return CallableProgram(fn, agent)
