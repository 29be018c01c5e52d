"""``AgentProgramEnv``: any environment's tasks and rubric, with the user's unmodified agent program as the
harness, its model calls routed through the run's recording gateway (``verigym.gateway``).

Per rollout: a gateway session is opened with the run's sampling (temperature, top-p, seed and the
max-tokens cap of the run apply to every call of the program), the program runs with a client pointed
at the session (``_program``), the session's recorded calls become the trajectory (``_trace``: exact
sampled ids, the main conversation for the graders, branches labelled), and the environment's rubric
grades it as it grades its own harness's trajectories.

**Failure rules.** A program that raises, exits non-zero, hangs past ``timeout_s`` or never calls the
model gives an errored trajectory (``stop_reason="error"``, ``ErrorInfo(kind="agent_<why>")`` with the
reason): kept out of rewards and out of the group's baseline like every errored sample, never a 0. With
``on_error="truncate"`` a failed program that made calls keeps them as a trajectory marked
``stop_reason="truncated"`` (graded and trained on its valid prefix; the reason in ``state``).

**Tools.** When the environment has tools, one runner per rollout (``env.run_call`` with the rollout's
``setup_state``) serves them both ways: a callable gets them as Python tools (``AgentTask.tools`` /
``call_tool``), a command as the rollout's MCP server (``VERIGYM_MCP_URL``: the gateway session's
``/sessions/{id}/mcp``, ``gateway._mcp``), run on the rollout's event loop.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from verigym.agents._program import AgentError, AgentProgram, AgentTask
from verigym.agents._trace import label_calls, main_prompt, trace_counts, trace_turns
from verigym.envs.base import _EPISODE_TASK, Environment
from verigym.policies.base import Policy
from verigym.types import ErrorInfo, Sampling, Task, ToolCall, Trajectory

if TYPE_CHECKING:
    from verigym.gateway import Gateway

__all__ = ["AgentProgramEnv"]

OnError = Literal["error", "truncate"]


class AgentProgramEnv(Environment):
    """``base``'s tasks and rubric, harnessed by ``program`` (see the module doc)."""

    def __init__(
        self,
        base: Environment,
        program: AgentProgram,
        *,
        timeout_s: float = 300.0,
        on_error: OnError = "error",
    ) -> None:
        if on_error not in ("error", "truncate"):
            raise ValueError(f"on_error must be 'error' or 'truncate', got {on_error!r}")
        super().__init__(rubric=base.rubric, system_prompt=base.system_prompt)
        self.base, self.program = base, program
        self.timeout_s, self.on_error = timeout_s, on_error
        self.name, self.description = base.name, base.description
        self.real_model_args = base.real_model_args  # type: ignore[misc]
        self._gateways: dict[int, Gateway] = {}
        self._lock = threading.Lock()

    def tasks(self, n: int | None = None, *, seed: int = 0, split: str = "test") -> list[Task]:
        return self.base.tasks(n, seed=seed, split=split)

    def tool_schemas(self) -> list[dict[str, Any]] | None:
        return self.base.tool_schemas()

    def oracle_policy(self) -> Policy | None:
        return self.base.oracle_policy()

    def null_policy(self) -> Policy | None:
        return self.base.null_policy()

    def summary_metrics(
        self, tasks: Sequence[Task], scores: Mapping[str, Sequence[tuple[int, float]]]
    ) -> dict[str, Any]:
        return self.base.summary_metrics(tasks, scores)

    def __getattr__(self, name: str) -> Any:  # the base env's own attributes (task_name, level, ...)
        if name.startswith("_") or name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)

    # ---- the gateway ------------------------------------------------------------------------------

    def gateway(self, policy: Policy) -> Gateway:
        """The run's gateway for ``policy`` (one per policy, started on first use, stopped by ``close``)."""
        from verigym.gateway import Gateway

        with self._lock:
            gw = self._gateways.get(id(policy))
            if gw is not None and gw.policy is not policy:  # an id reused by a new object
                gw.stop()
                gw = None
            if gw is None:
                gw = self._gateways[id(policy)] = Gateway(policy).start()
                if len(self._gateways) == 1:
                    atexit.register(self.close)
            return gw

    def close(self) -> None:
        """Stop every gateway this environment started."""
        with self._lock:
            gateways, self._gateways = list(self._gateways.values()), {}
        for gw in gateways:
            gw.stop()

    # ---- one rollout ------------------------------------------------------------------------------

    def agent_task(self, task: Task) -> AgentTask:
        """What the program is handed for ``task`` (public info only: hidden tests and answers stay here)."""
        public = getattr(self.base, "public_info_keys", ())
        tools: dict[str, Any] = {}
        runner = None
        base_tools = getattr(self.base, "tools", None)
        run_call = getattr(self.base, "run_call", None)
        if base_tools and run_call is not None:
            tools = {t.name: t.fn for t in base_tools}
            setup = getattr(self.base, "setup_state", None)
            state: dict[str, Any] = setup(task) if setup is not None else {}

            async def runner(name: str, arguments: str) -> str:
                return str(await run_call(ToolCall(id="call_program", name=name, arguments=arguments), state))

        return AgentTask(
            id=task.id,
            messages=[m.to_openai() for m in self.base.with_system_prompt(task.prompt)],
            tool_schemas=self.base.tool_schemas(),
            info={k: task.info[k] for k in public if k in task.info},
            tools=tools,
            runner=runner,
        )

    async def rollout(self, task: Task, policy: Policy, sampling: Sampling) -> Trajectory:
        from verigym.gateway import SessionTools

        trajectory = Trajectory(
            task_id=task.id, prompt=self.base.with_system_prompt(task.prompt), started_at=time.time()
        )
        start = time.perf_counter()
        gw = self.gateway(policy)
        agent_task = self.agent_task(task)
        tools = None
        if agent_task.runner is not None:  # the same runner (and state) as Python tools and over MCP
            tools = SessionTools(agent_task.tool_schemas or [], agent_task.runner, asyncio.get_running_loop())
        session = gw.open(sampling, task=task, tools=tools)
        if tools is not None:
            agent_task.mcp_url = session.mcp_url
        token = _EPISODE_TASK.set(task)
        answer, failure = "", None
        try:
            answer = await self.program.run(
                agent_task, session.base_url, session.key, session.id, self.timeout_s
            )
        except AgentError as exc:
            failure = exc
        finally:
            _EPISODE_TASK.reset(token)
            calls = gw.close(session.id)
        if failure is None and not calls:
            failure = AgentError("silent", f"agent {self.program.label} never called the model")
        labels = label_calls(calls)
        if calls:
            trajectory.turns = trace_turns(calls, labels, answer)
            trajectory.prompt = main_prompt(calls, labels) or trajectory.prompt  # as the program sent it
        trajectory.state = {
            "gateway": trace_counts(labels, sum(c.replayed for c in calls)),
            "calls": [
                {**lb.as_dict(), "dialect": c.dialect, "wall_s": round(c.wall_s, 4)}
                for lb, c in zip(labels, calls, strict=True)
            ],
        }
        if failure is not None:
            reason = ErrorInfo(kind=f"agent_{failure.kind}", message=str(failure))
            if self.on_error == "truncate" and calls:
                trajectory.stop_reason = "truncated"
                trajectory.state["agent_error"] = reason.model_dump()
            else:
                trajectory.stop_reason, trajectory.error = "error", reason
        elif calls and calls[-1].completion.finish_reason == "length":
            trajectory.stop_reason = "length"
        trajectory.wall_s = time.perf_counter() - start
        return trajectory
