"""The built-in ``tools_user`` environment: the ``tools`` shop, with the customer as a simulated user.

The agent's prompt is only an opening ("Hi! I need some help (ticket #123456)."); who the
customer is and what they want live in ``Task.info["user"]`` (hidden). The agent must ask
(the user reveals their email when asked for it, and their request when asked what they need;
a patient scripted user volunteers the next piece when the agent asks for nothing it knows),
then act with the shop's tools, then tell the user the facts they asked for; the user then
ends the conversation. Requests, databases and graders are those of ``tools`` (``envs.shop``):
``final_state`` (the final database equals the gold replay; weight 0, reported) gates
``outputs`` (every required fact was said to the user) — τ-bench-style final-state grading.

``user`` picks the simulator: ``"scripted"`` (default, offline, deterministic) or a model
served over an OpenAI-compatible API (``user_model`` with ``user_base_url``, and ``user_api_key_env``
naming the variable that holds its key, as ``verigym.policies.ModelSpec`` reads it), which is shown the
goal's plain-language ``instruction`` (``envs.user_sim.PolicyUser``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from verigym.envs._args import int_arg
from verigym.envs.builtin._shop_db import SHOP_TOOLS, make_db
from verigym.envs.builtin.shop import SYSTEM_PROMPT, ShopEnv, all_done, gold_calls, shop_rubric
from verigym.envs.procedural import ProceduralEnv
from verigym.envs.registry import EnvArgError
from verigym.envs.user_sim import Reveal, ScriptedUser, User, UserSimEnv
from verigym.policies.base import Policy
from verigym.policies.scripted import Reply, ScriptedPolicy
from verigym.policies.spec import MissingApiKey, ModelSpec, make_policy
from verigym.types import Message, Task

__all__ = ["ShopUserEnv", "shop_reveals"]

ASK = "Hello! I can help. What is the email on your account, and what do you need?"
_WHO = ("email", "e-mail", "who", "account", "name")
_WHAT = ("need", "help", "what", "how can", "request")


def shop_reveals(task: Task) -> list[Reveal]:
    """What the scripted customer says: their email when asked who they are, then their request."""
    user = task.info["user"]
    return [Reveal(_WHO, f"My email is {user['email']}."), Reveal(_WHAT, str(user["request"]))]


class ShopUserEnv(ProceduralEnv, UserSimEnv):
    """Shop customer service where the customer is a simulated user with a hidden goal."""

    name = "tools_user"
    description = (
        "Shop customer service with a simulated user who holds the goal (tau-bench style): ask, act "
        "through tools; graded by final database state and the facts told to the user."
    )
    public_info_keys = ("gold_actions",)  # tool names and arguments the user's request states

    def __init__(
        self,
        level: int = 2,
        size: int = 1000,
        max_turns: int = 12,
        user: str = "scripted",
        user_model: str | None = None,
        user_base_url: str | None = None,
        user_api_key_env: str | None = None,
        system_prompt: str | None = SYSTEM_PROMPT,
        tool_variant: int | None = None,
    ) -> None:
        self.level = int_arg("tools_user", "level", level, 1, 3)
        self.size = int_arg("tools_user", "size", size, 1, 10**9)
        super().__init__(
            SHOP_TOOLS,
            user=_make_user(user, user_model, user_base_url, user_api_key_env),
            rubric=shop_rubric(),
            system_prompt=system_prompt,
            max_turns=int_arg("tools_user", "max_turns", max_turns, 2, 100),
            tool_variant=tool_variant,
        )
        self._shop = ShopEnv(level=self.level)

    @property
    def task_name(self) -> str:
        return f"shop-user-l{self.level}"

    def generate(self, rng: random.Random) -> Task:
        inner = self._shop.generate(rng)
        db = make_db(int(inner.info["db_seed"]))
        request = inner.prompt[0].content.split("). ", 1)[1]  # "Hi, this is Ada (email). <request>"
        email = next(c["email"] for c in db["customers"].values() if c["email"] in inner.prompt[0].content)
        customer = next(c for c in db["customers"].values() if c["email"] == email)
        user = {
            "name": customer["name"],
            "email": email,
            "instruction": f"You are {customer['name']} ({email}). {request}",
            "request": request,
        }
        opening = f"Hi! I need some help (ticket #{rng.randrange(100000, 1000000)})."
        info = {**inner.info, "user": user}
        return Task(id="", prompt=(Message(role="user", content=opening),), info=info)

    def user_for(self, task: Task) -> User:
        """The configured user, else the scripted customer (``shop_reveals``)."""
        return self.user if self.user is not None else ScriptedUser(shop_reveals)

    def setup_state(self, task: Task) -> dict[str, Any]:
        """The episode's own database, fresh from the task's seed."""
        return {**super().setup_state(task), "db": make_db(int(task.info["db_seed"]))}

    def oracle_policy(self) -> Policy:
        """Asks who the customer is and what they need, performs the gold actions, states the facts."""
        return self.task_oracle(_oracle_turn, name="tools_user-oracle")

    def null_policy(self) -> Policy:
        """Apologises and does nothing."""
        return ScriptedPolicy(lambda messages: "Sorry, I cannot help with that.", name="tools_user-null")


def _make_user(kind: str, model: str | None, base_url: str | None, api_key_env: str | None) -> Policy | None:
    if kind == "scripted":
        if model is not None or base_url is not None:
            raise EnvArgError("tools_user: user_model/user_base_url need user='policy'")
        if api_key_env is not None:
            raise EnvArgError("tools_user: user_api_key_env needs user='policy'")
        return None
    if kind != "policy":
        raise EnvArgError(f"tools_user: user must be 'scripted' or 'policy', got {kind!r}")
    if not model or not base_url:
        raise EnvArgError("tools_user: user='policy' needs user_model and user_base_url")
    try:
        return make_policy(ModelSpec(model=model, base_url=[base_url], api_key_env=api_key_env))
    except MissingApiKey as exc:
        raise EnvArgError(f"tools_user: {exc.worded('user_api_key_env')}") from None


def _oracle_turn(task: Task, messages: Sequence[Message]) -> Reply:
    spoken = [m for m in messages if m.role == "assistant"]
    if not spoken:
        return ASK
    acted = any(m.tool_calls for m in spoken)
    if not acted and task.info["gold_actions"]:
        return "", gold_calls(task)
    return all_done(task)
