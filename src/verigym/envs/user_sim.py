"""``UserSimEnv``: the agent talks to a simulated user who holds the goal (τ-bench's setting).

Yao et al. 2024, "τ-bench: A Benchmark for Tool-Agent-User Interaction in Real-World Domains"
(arXiv:2406.12045): the task's goal is *not* in the agent's prompt. A user simulator knows it
(``Task.info``, hidden) and reveals it only through the conversation, so the agent must ask,
then act through tools; the grade comes from the final state of the world, not the words.

**Harness.** A ``ToolEnv`` whose episode alternates: the agent speaks; when it asks for tool
calls the tools answer, as in any tool environment; when it answers *without* tool calls, the
message goes to the user, whose reply is the next ``user`` message. The episode ends when the
user says ``STOP`` (``###STOP###``, τ-bench's token), or at a limit (max turns, tokens, time).
User turns are environment turns: they never enter the loss.

**Users.** Anything with ``async reply(task, conversation) -> str`` (``User``):

- ``ScriptedUser`` — deterministic, for tests and offline training: the goal is a list of
  ``Reveal`` pieces (keywords → what the user says). Each agent message reveals the pieces whose
  keywords it mentions; a message that asks for nothing known gets the next piece (a patient
  user); once everything is said, a message without a question ends the conversation.
- ``PolicyUser`` — a second ``Policy`` plays the user: it is shown a system prompt with its
  hidden goal and the conversation with the roles flipped (the agent's words as ``user``
  messages, its own as ``assistant``), tool traffic left out; ``STOP`` in its reply ends.

``UserSimEnv.user_for(task)`` picks the user of an episode; ``user=`` overrides it with a
``Policy`` (→ ``PolicyUser``) or any ``User``. Tasks carry the user's goal in
``info["user"]``: ``{"instruction": ..., "reveals": [{"keywords": [...], "text": ...}]}``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from verigym.envs.tool import ToolEnv
from verigym.policies.base import Policy
from verigym.rubric import Rubric
from verigym.tools import Tool
from verigym.types import Message, Sampling, Task, Trajectory

__all__ = ["STOP", "PolicyUser", "Reveal", "ScriptedUser", "User", "UserSimEnv", "reveals_of"]

STOP = "###STOP###"

USER_SYSTEM_PROMPT = (
    "You are a customer talking to a customer-service agent. You are not an assistant: never solve "
    "the task yourself. Your goal, which only you know:\n\n{instruction}\n\n"
    "Say one or two sentences at a time. Give information only when the agent asks for it or when "
    "the agent cannot go on without it; never invent facts that are not in your goal. When the agent "
    "has done what you wanted (or clearly cannot), thank them and end your message with " + STOP + "."
)


@runtime_checkable
class User(Protocol):
    """Plays the user of one episode: the reply to the conversation so far (agent's view)."""

    async def reply(self, task: Task, conversation: Sequence[Message]) -> str: ...


@dataclass(frozen=True)
class Reveal:
    """One piece of the user's goal: said when the agent mentions any of ``keywords``."""

    keywords: tuple[str, ...]
    text: str


def reveals_of(task: Task) -> list[Reveal]:
    """The ``Reveal`` pieces stored in ``task.info["user"]["reveals"]``, in order."""
    raw = task.info.get("user", {}).get("reveals", [])
    return [Reveal(tuple(str(k).lower() for k in r["keywords"]), str(r["text"])) for r in raw]


def _agent_texts(conversation: Sequence[Message]) -> list[str]:
    """The agent's messages to the user (assistant messages without tool calls)."""
    return [m.content for m in conversation if m.role == "assistant" and not m.tool_calls]


class ScriptedUser:
    """A deterministic user (see the module docstring). ``reveals(task)`` lists the goal's pieces
    (default ``reveals_of``: ``info["user"]["reveals"]``); ``thanks`` ends the conversation."""

    def __init__(
        self,
        reveals: Callable[[Task], list[Reveal]] = reveals_of,
        thanks: str = "Thank you, that is all I needed.",
    ) -> None:
        self.reveals = reveals
        self.thanks = thanks

    async def reply(self, task: Task, conversation: Sequence[Message]) -> str:
        pieces = self.reveals(task)
        said = _agent_texts(conversation)
        revealed: set[int] = set()
        answer = ""
        for text in said:  # replay the conversation: what has been revealed before the last message
            answer, new = self._step(pieces, revealed, text)
            revealed |= new
        return answer

    def _step(self, pieces: Sequence[Reveal], revealed: set[int], text: str) -> tuple[str, set[int]]:
        lower = text.lower()
        left = [i for i in range(len(pieces)) if i not in revealed]
        if not left:
            if "?" in text:
                return "I have told you everything I know.", set()
            return f"{self.thanks} {STOP}", set()
        asked = {i for i in left if any(k in lower for k in pieces[i].keywords)}
        new = asked or {left[0]}
        return " ".join(pieces[i].text for i in sorted(new)), new


class PolicyUser:
    """A ``Policy`` plays the user, told its hidden goal (``info["user"]["instruction"]``)."""

    def __init__(
        self, policy: Policy, *, sampling: Sampling | None = None, system_prompt: str = USER_SYSTEM_PROMPT
    ) -> None:
        self.policy = policy
        self.sampling = sampling or Sampling(temperature=0.0, max_tokens=256)
        self.system_prompt = system_prompt

    async def reply(self, task: Task, conversation: Sequence[Message]) -> str:
        instruction = str(task.info.get("user", {}).get("instruction", ""))
        view = [Message(role="system", content=self.system_prompt.format(instruction=instruction))]
        for m in conversation:
            if m.role == "user":
                view.append(Message(role="assistant", content=m.content))
            elif m.role == "assistant" and not m.tool_calls and m.content.strip():
                view.append(Message(role="user", content=m.content))
        completion = await self.policy.complete(view, sampling=self.sampling)
        return completion.text.strip() or STOP


class UserSimEnv(ToolEnv):
    """A tool environment with a simulated user in the loop (see the module docstring).

    ``user``: a ``User``, a ``Policy`` (wrapped in ``PolicyUser``) or None (``user_for(task)``
    decides; the default is a ``ScriptedUser``). Subclasses implement ``tasks`` and the rubric.
    """

    def __init__(
        self,
        tools: Sequence[Tool | Callable[..., Any]] = (),
        *,
        user: User | Policy | None = None,
        rubric: Rubric | None = None,
        system_prompt: str | None = None,
        max_turns: int = 12,
        max_total_tokens: int | None = None,
        timeout_s: float | None = None,
        tool_variant: int | None = None,
    ) -> None:
        super().__init__(
            tools,
            rubric=rubric,
            system_prompt=system_prompt,
            max_turns=max_turns,
            max_total_tokens=max_total_tokens,
            timeout_s=timeout_s,
            tool_variant=tool_variant,
        )
        self.user: User | None = (
            None if user is None else user if isinstance(user, User) else PolicyUser(user)
        )

    def user_for(self, task: Task) -> User:
        """The user of an episode of ``task`` (``self.user``, else a ``ScriptedUser``)."""
        return self.user if self.user is not None else ScriptedUser()

    def setup_state(self, task: Task) -> dict[str, Any]:
        """Subclasses extend it (``{**super().setup_state(task), ...}``); ``_task`` is for the user."""
        return {"user_turns": 0, "user_stopped": False, "_task": task}

    async def done(self, trajectory: Trajectory, state: dict[str, Any]) -> bool:
        return bool(state.get("user_stopped"))

    async def respond(self, trajectory: Trajectory, state: dict[str, Any]) -> list[Message]:
        last = trajectory.turns[-1].messages
        if any(m.tool_calls for m in last):
            return await super().respond(trajectory, state)
        task = state.get("_task")
        if not isinstance(task, Task):
            raise RuntimeError("UserSimEnv: the episode's task is missing from its state")
        text = await self.user_for(task).reply(task, trajectory.messages)
        state["user_turns"] = int(state.get("user_turns", 0)) + 1
        if STOP in text:
            state["user_stopped"] = True
        return [Message(role="user", content=text)]

    async def rollout(self, task: Task, policy: Policy, sampling: Sampling) -> Trajectory:
        trajectory = await super().rollout(task, policy, sampling)
        trajectory.state.pop("_task", None)  # the user's copy of the task is not episode state
        return trajectory
