"""The in-memory shop database of the ``tools`` environment and the typed tools over it.

A database is a JSON-native dict generated from a seed (``make_db``): ``customers``,
``products`` and ``orders`` keyed by id, plus ``next_order`` for new order ids. Money is kept
in integer cents and shown in dollars with two decimals. Every tool takes the episode ``State``
(``{"db": ...}``) and raises ``ValueError`` with a reason the model can act on when a request
breaks the shop's policy. ``apply_action`` replays a gold action through the same functions,
so the grader's replay and the agent's episode cannot disagree about what a tool does.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from verigym.tools import State, Tool

__all__ = ["SHOP_TOOLS", "apply_action", "dollars", "make_db"]

_FIRST = ["Ada", "Bram", "Cleo", "Dario", "Elin", "Farah", "Gus", "Hana", "Ivo", "Juno", "Kai", "Lena"]
_LAST = ["Moss", "Quill", "Ferro", "Lark", "Brandt", "Okafor", "Nyqvist", "Sato", "Vance", "Whitlow"]
_STREETS = ["Elm Street", "Harbor Road", "Maple Avenue", "Mill Lane", "Station Road", "Birch Way"]
_CITIES = ["Northfield", "Eastbrook", "Westhaven", "Southport", "Riverton", "Lakeside"]
CATEGORIES: dict[str, list[str]] = {
    "kitchen": ["Copper Kettle", "Bamboo Cutting Board", "Cast Iron Skillet", "Ceramic Teapot"],
    "garden": ["Watering Can", "Pruning Shears", "Seed Starter Kit", "Garden Gloves"],
    "office": ["Desk Lamp", "Fountain Pen", "Notebook Set", "Monitor Stand"],
    "outdoor": ["Camping Lantern", "Trail Backpack", "Insulated Bottle", "Hammock"],
}


def dollars(cents: int) -> str:
    """``1250`` -> ``"12.50"``."""
    return f"{cents // 100}.{cents % 100:02d}"


def make_db(seed: int) -> dict[str, Any]:
    """A fresh database for ``seed``: 5 customers with a pending, a shipped and a delivered order each."""
    rng = random.Random(f"verigym/shop/{seed}")
    products: dict[str, Any] = {}
    pid = rng.randint(100, 800)
    for category, names in CATEGORIES.items():
        for name in names:
            pid += rng.randint(1, 9)
            price = rng.randint(5, 120) * 100 + rng.choice([0, 49, 50, 95, 99])
            while any(p["price"] == price for p in products.values()):  # "the cheapest" is never a tie
                price += 1
            products[f"P{pid}"] = {"id": f"P{pid}", "name": name, "category": category, "price": price}
            products[f"P{pid}"]["stock"] = rng.randint(3, 40)
    customers: dict[str, Any] = {}
    orders: dict[str, Any] = {}
    oid = rng.randint(1000, 8000)
    first_names = rng.sample(_FIRST, 5)
    for i, first in enumerate(first_names):
        last = rng.choice(_LAST)
        cid = f"C{rng.randint(10, 99)}{i}"
        customers[cid] = {
            "id": cid,
            "name": f"{first} {last}",
            "email": f"{first.lower()}.{last.lower()}{rng.randint(1, 99)}@example.com",
            "address": {
                "street": f"{rng.randint(1, 300)} {rng.choice(_STREETS)}",
                "city": rng.choice(_CITIES),
                "zip_code": f"{rng.randint(10000, 99999)}",
            },
        }
        for status in rng.sample(["pending", "shipped", "delivered"], 3):
            oid += rng.randint(1, 30)
            picked = rng.sample(sorted(products), rng.randint(1, 2))
            items = [
                {
                    "product_id": p,
                    "name": products[p]["name"],
                    "quantity": rng.randint(1, 3),
                    "price": products[p]["price"],
                }
                for p in picked
            ]
            order = {
                "id": f"O{oid}",
                "customer_id": cid,
                "items": items,
                "status": status,
                "total": sum(it["quantity"] * it["price"] for it in items),
                "refunded": 0,
                "tracking": f"TRK-{rng.randint(100000, 999999)}" if status != "pending" else None,
            }
            orders[order["id"]] = order
    return {"customers": customers, "products": products, "orders": orders, "next_order": oid + 1}


def _db(state: Mapping[str, Any]) -> dict[str, Any]:
    db = state.get("db")
    if not isinstance(db, dict):
        raise RuntimeError("the episode has no shop database")
    return db


def _order(db: dict[str, Any], order_id: str) -> dict[str, Any]:
    order = db["orders"].get(order_id.strip())
    if order is None:
        raise ValueError(f"no order {order_id!r}")
    return dict(order)


def _show_order(order: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(order)
    out["items"] = [dict(it, price=dollars(it["price"])) for it in order["items"]]
    out["total"], out["refunded"] = dollars(order["total"]), dollars(order["refunded"])
    return out


def lookup_customer(email: str, state: State) -> dict[str, Any]:
    """Find a customer by email address.

    Args:
        email: the customer's email address.
    """
    for customer in _db(state)["customers"].values():
        if customer["email"].lower() == email.strip().lower():
            return dict(customer)
    raise ValueError(f"no customer with email {email!r}")


def list_orders(customer_id: str, state: State) -> list[dict[str, Any]]:
    """List a customer's orders (id, status, total, item names).

    Args:
        customer_id: the customer's id, e.g. C123.
    """
    db = _db(state)
    if customer_id not in db["customers"]:
        raise ValueError(f"no customer {customer_id!r}")
    return [
        {
            "id": o["id"],
            "status": o["status"],
            "total": dollars(o["total"]),
            "items": [i["name"] for i in o["items"]],
        }
        for o in db["orders"].values()
        if o["customer_id"] == customer_id
    ]


def get_order(order_id: str, state: State) -> dict[str, Any]:
    """Full details of one order: items with unit prices (dollars), status, total, refunded, tracking.

    Args:
        order_id: the order id, e.g. O4521.
    """
    return _show_order(_order(_db(state), order_id))


def search_products(query: str, state: State, max_price: float | None = None) -> list[dict[str, Any]]:
    """Search products whose name or category contains the query (case-insensitive).

    Args:
        query: words to look for, e.g. "kettle" or "garden".
        max_price: only products costing at most this many dollars.
    """
    q = query.strip().lower()
    found = [
        dict(p, price=dollars(p["price"]))
        for p in _db(state)["products"].values()
        if (q in p["name"].lower() or q == p["category"])
        and (max_price is None or p["price"] <= round(max_price * 100))
    ]
    return sorted(found, key=lambda p: p["id"])


def update_address(customer_id: str, street: str, city: str, zip_code: str, state: State) -> str:
    """Change a customer's shipping address.

    Args:
        customer_id: the customer's id.
        street: street and number, e.g. "12 Elm Street".
        city: the city.
        zip_code: the five-digit zip code.
    """
    db = _db(state)
    if customer_id not in db["customers"]:
        raise ValueError(f"no customer {customer_id!r}")
    address = {"street": street.strip(), "city": city.strip(), "zip_code": zip_code.strip()}
    db["customers"][customer_id] = dict(db["customers"][customer_id], address=address)
    return f"address of {customer_id} updated"


def cancel_order(order_id: str, state: State) -> str:
    """Cancel a pending order (shipped or delivered orders cannot be cancelled); items go back in stock.

    Args:
        order_id: the order id.
    """
    db = _db(state)
    order = _order(db, order_id)
    if order["status"] != "pending":
        raise ValueError(f"order {order['id']} is {order['status']}; only pending orders can be cancelled")
    for item in order["items"]:
        product = db["products"][item["product_id"]]
        db["products"][item["product_id"]] = dict(product, stock=product["stock"] + item["quantity"])
    db["orders"][order["id"]] = dict(order, status="cancelled")
    return f"order {order['id']} cancelled; {dollars(order['total'])} will not be charged"


def refund(order_id: str, amount: float, state: State) -> str:
    """Refund part or all of a delivered order.

    Args:
        order_id: the order id.
        amount: the amount to refund in dollars (at most what was paid and not yet refunded).
    """
    db = _db(state)
    order = _order(db, order_id)
    cents = round(amount * 100)
    if order["status"] != "delivered":
        raise ValueError(f"order {order['id']} is {order['status']}; only delivered orders can be refunded")
    if cents <= 0 or cents > order["total"] - order["refunded"]:
        left = dollars(order["total"] - order["refunded"])
        raise ValueError(f"refund must be more than 0 and at most {left} for order {order['id']}")
    db["orders"][order["id"]] = dict(order, refunded=order["refunded"] + cents)
    return f"refunded {dollars(cents)} on order {order['id']}"


def place_order(customer_id: str, product_id: str, quantity: int, state: State) -> str:
    """Place a new order of one product for a customer (charged at the current price).

    Args:
        customer_id: the customer's id.
        product_id: the product id, e.g. P123.
        quantity: how many (1 or more, at most the stock).
    """
    db = _db(state)
    product = db["products"].get(product_id)
    if customer_id not in db["customers"] or product is None:
        raise ValueError(f"no customer {customer_id!r} or no product {product_id!r}")
    if not 1 <= quantity <= product["stock"]:
        raise ValueError(f"quantity must be from 1 to {product['stock']}")
    oid = f"O{db['next_order']}"
    item = {
        "product_id": product_id,
        "name": product["name"],
        "quantity": quantity,
        "price": product["price"],
    }
    total = quantity * product["price"]
    db["orders"][oid] = {
        "id": oid, "customer_id": customer_id, "items": [item], "status": "pending",
        "total": total, "refunded": 0, "tracking": None,
    }  # fmt: skip
    db["products"][product_id] = dict(product, stock=product["stock"] - quantity)
    db["next_order"] += 1
    return f"order {oid} placed: {quantity} x {product['name']}, total {dollars(total)}"


SHOP_TOOLS: tuple[Tool, ...] = tuple(
    Tool.from_function(fn)
    for fn in (
        lookup_customer,
        list_orders,
        get_order,
        search_products,
        update_address,
        cancel_order,
        refund,
        place_order,
    )
)
"""The shop's tools, in the order they are offered (a tuple of ``Tool``; wrap or rename freely)."""


def apply_action(db: dict[str, Any], action: Mapping[str, Any]) -> None:
    """Replay one gold action ``{"name", "arguments"}`` on ``db`` in place, through the tool itself."""
    tool = next((t for t in SHOP_TOOLS if t.name == action["name"]), None)
    if tool is None:
        raise ValueError(f"unknown shop action {action['name']!r}")
    kwargs = tool.validate(dict(action["arguments"]))
    assert tool.state_param is not None
    tool.fn(**kwargs, **{tool.state_param: {"db": db}})
