"""The built-in ``tools`` environment: customer service for a small shop, through typed tools.

**Task.** A customer writes one message (they give their email; they do not know ids): change
my address, what is the tracking number of my order of the desk lamp, cancel my pending order,
refund the broken kettle, buy me the cheapest garden item under $40... The agent must look
things up and act with the shop's tools. Each task has its own database, generated from
``Task.info["db_seed"]`` (see ``_shop_db``); ``info["gold_actions"]`` lists the write actions a
correct agent performs (``{"name", "arguments"}``; public, since their arguments repeat what
the user asks, e.g. a new address) and ``info["outputs"]`` the facts the reply must state
(amounts, tracking numbers, product names — never shown in the prompt).

**Harness.** ``ToolEnv``: the tools are ``lookup_customer``, ``list_orders``, ``get_order``,
``search_products``, ``update_address``, ``cancel_order``, ``refund`` and ``place_order``
(``SHOP_TOOLS``; ``env.tools`` is the tuple offered to the model, ``env.tool(name)`` finds
one — wrap, rename or reorder them freely; ``tool_variant=SEED`` offers a seeded variant with
renamed tools and arguments, reworded descriptions and distractors, see ``tools.variants``). Tools work on the episode's own copy of the
database, ``state["db"]`` (a ``State`` parameter), so episodes never share writes. A policy
violation (cancelling a shipped order, refunding more than was paid) is a tool error the
model sees.

**Graders** (Yao et al. 2024, "τ-bench"): ``final_state`` — the hash of the agent's final
database equals the hash after replaying the gold actions on a fresh copy
(``graders.toolcall.final_state_grader``; weight 0, reported) — and ``outputs`` — every required
fact appears in the replies as a whole token (``required_outputs_grader``), gated on
``final_state``: the reward is 1 only when the database is right *and* the reply says so.

**Difficulty** (``level``): 1 — one read-only question or an address change; 2 — one write
that needs lookups and arithmetic (cancel, refund an item, buy the cheapest matching product);
3 — two requests from levels 1-2 in one message.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from typing import Any

from verigym.envs._args import int_arg
from verigym.envs.builtin._shop_db import CATEGORIES, SHOP_TOOLS, apply_action, dollars, make_db
from verigym.envs.procedural import ProceduralEnv
from verigym.envs.tool import ToolEnv
from verigym.graders.toolcall import final_state_grader, required_outputs_grader
from verigym.policies.base import Policy
from verigym.policies.scripted import Reply, ScriptedPolicy
from verigym.rubric import Rubric
from verigym.types import Message, Task, ToolCall

__all__ = [
    "SHOP_TOOLS",
    "SYSTEM_PROMPT",
    "ShopEnv",
    "all_done",
    "apply_action",
    "gold_calls",
    "make_db",
    "shop_rubric",
]

SYSTEM_PROMPT = (
    "You are the customer-service agent of Lumen Shop. Use the tools to look things up and act; "
    "never guess ids. Identify the customer by their email first. Policy: only "
    "pending orders can be cancelled; only delivered orders can be refunded, for at most what was "
    "paid; new orders are for the customer who asks. When you are done, tell the customer what you "
    "did and the exact facts they asked for (amounts in dollars with two decimals, ids, tracking "
    "numbers, product names)."
)

Request = tuple[str, list[dict[str, Any]], list[str]]  # (what the user says, gold actions, outputs)


def _orders_of(db: dict[str, Any], cid: str, status: str) -> list[dict[str, Any]]:
    return [o for o in db["orders"].values() if o["customer_id"] == cid and o["status"] == status]


def _address(rng: random.Random, db: dict[str, Any], cid: str) -> Request:
    new = {
        "street": f"{rng.randint(301, 999)} {rng.choice(['Orchard', 'Quarry', 'Tannery', 'Willow'])} Street",
        "city": rng.choice(["Ashford", "Glenmoor", "Kingsbridge", "Pinecrest"]),
        "zip_code": f"{rng.randint(10000, 99999)}",
    }
    text = f"I moved. Please change my shipping address to {new['street']}, {new['city']} {new['zip_code']}."
    return text, [{"name": "update_address", "arguments": {"customer_id": cid, **new}}], []


def _tracking(rng: random.Random, db: dict[str, Any], cid: str) -> Request:
    order = rng.choice(_orders_of(db, cid, "shipped"))
    item = order["items"][0]["name"]
    return (
        f"What is the tracking number of my order with the {item} that is on its way?",
        [],
        [order["tracking"]],
    )


def _total(rng: random.Random, db: dict[str, Any], cid: str) -> Request:
    order = rng.choice(_orders_of(db, cid, "delivered"))
    item = order["items"][0]["name"]
    text = f"How much did I pay in total for the order with the {item} that I already received?"
    return text, [], [dollars(order["total"])]


def _cancel(rng: random.Random, db: dict[str, Any], cid: str) -> Request:
    order = _orders_of(db, cid, "pending")[0]
    item = order["items"][0]["name"]
    text = f"Please cancel my order with the {item} - it has not shipped yet. How much was it?"
    return text, [{"name": "cancel_order", "arguments": {"order_id": order["id"]}}], [dollars(order["total"])]


def _refund(rng: random.Random, db: dict[str, Any], cid: str) -> Request:
    order = _orders_of(db, cid, "delivered")[0]
    item = rng.choice(order["items"])
    cents = item["price"] * item["quantity"]
    text = (
        f"The {item['name']} I received arrived broken. Please refund what I paid for it "
        "(all of them in that order, nothing else), and tell me the amount."
    )
    action = {"name": "refund", "arguments": {"order_id": order["id"], "amount": cents / 100}}
    return text, [action], [dollars(cents)]


def _buy(rng: random.Random, db: dict[str, Any], cid: str) -> Request:
    category = rng.choice(sorted(CATEGORIES))
    items = sorted(
        (p for p in db["products"].values() if p["category"] == category), key=lambda p: (p["price"], p["id"])
    )
    cheapest = items[0]
    limit = (cheapest["price"] // 100) + rng.randint(2, 20)
    qty = rng.randint(1, 2)
    text = f"Please order {qty} of the cheapest {category} product you sell (it must cost under ${limit})."
    action = {
        "name": "place_order",
        "arguments": {"customer_id": cid, "product_id": cheapest["id"], "quantity": qty},
    }
    return text, [action], [cheapest["name"], dollars(qty * cheapest["price"])]


LEVEL_REQUESTS: dict[int, list[Callable[[random.Random, dict[str, Any], str], Request]]] = {
    1: [_address, _tracking, _total],
    2: [_cancel, _refund, _buy],
}


class ShopEnv(ProceduralEnv, ToolEnv):
    """Customer service over a shop database behind typed tools; tau-bench-style grading."""

    name = "tools"
    description = "Shop customer service over typed tools; graded by final database state and required facts."
    public_info_keys = ("gold_actions",)

    def __init__(
        self,
        level: int = 2,
        size: int = 1000,
        max_turns: int = 12,
        system_prompt: str | None = SYSTEM_PROMPT,
        tool_variant: int | None = None,
    ) -> None:
        self.level = int_arg("tools", "level", level, 1, 3)
        self.size = int_arg("tools", "size", size, 1, 10**9)
        super().__init__(
            SHOP_TOOLS,
            rubric=shop_rubric(),
            system_prompt=system_prompt,
            max_turns=max_turns,
            tool_variant=tool_variant,
        )

    @property
    def task_name(self) -> str:
        return f"shop-l{self.level}"

    def generate(self, rng: random.Random) -> Task:
        seed = rng.getrandbits(40)
        db = make_db(seed)
        customer = db["customers"][rng.choice(sorted(db["customers"]))]
        if self.level < 3:
            makers = [rng.choice(LEVEL_REQUESTS[self.level])]
        else:
            makers = rng.sample([*LEVEL_REQUESTS[1], *LEVEL_REQUESTS[2]], 2)
            while set(makers) == {_buy, _cancel}:  # a new pending order could make "cancel" ambiguous
                makers = rng.sample([*LEVEL_REQUESTS[1], *LEVEL_REQUESTS[2]], 2)
        texts: list[str] = []
        gold: list[dict[str, Any]] = []
        outputs: list[str] = []
        for make in makers:
            text, actions, facts = make(rng, db, customer["id"])
            for action in actions:  # later requests see earlier writes, as the agent would
                apply_action(db, action)
            texts.append(text if not texts else text[0].lower() + text[1:])
            gold += actions
            outputs += facts
        first = customer["name"].split()[0]
        message = f"Hi, this is {first} ({customer['email']}). " + " Also, ".join(texts)
        info = {"db_seed": seed, "gold_actions": gold, "outputs": outputs}
        return Task(id="", prompt=(Message(role="user", content=message),), info=info)

    def setup_state(self, task: Task) -> dict[str, Any]:
        """The episode's own database, fresh from the task's seed."""
        return {"db": make_db(int(task.info["db_seed"]))}

    def oracle_policy(self) -> Policy:
        """Performs the gold actions as tool calls in one turn, then states the required facts."""
        return self.task_oracle(_oracle_turn, name="tools-oracle")

    def null_policy(self) -> Policy:
        """Apologises and does nothing."""
        return ScriptedPolicy(lambda messages: "Sorry, I cannot help with that.", name="tools-null")


def _replay(db: dict[str, Any], action: Any) -> None:
    apply_action(db, action)


def shop_rubric() -> Rubric:
    """The shop's grading (``tools`` and ``tools_user``): the final database must equal a fresh one
    with the gold actions replayed (weight 0, a gate), then the required facts must be stated."""
    state = final_state_grader(
        lambda task: make_db(int(task.info["db_seed"])), _replay, weight=0.0, name="final_state"
    )
    return Rubric([state, required_outputs_grader(name="outputs")], gates={"outputs": ["final_state"]})


def gold_calls(task: Task) -> list[ToolCall]:
    """The task's gold actions as one turn of tool calls (what a shop oracle does)."""
    return [
        ToolCall(id=f"oracle-{i}", name=a["name"], arguments=json.dumps(a["arguments"]))
        for i, a in enumerate(task.info["gold_actions"])
    ]


def all_done(task: Task) -> str:
    """A shop oracle's closing message: the required facts."""
    facts = ", ".join(str(o) for o in task.info["outputs"])
    return f"All done. {facts}." if facts else "All done."


def _oracle_turn(task: Task, messages: Sequence[Message]) -> Reply:
    if not any(m.role == "assistant" for m in messages) and task.info["gold_actions"]:
        return "", gold_calls(task)
    return all_done(task)
