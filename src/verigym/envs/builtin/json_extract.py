"""The built-in ``json_extract`` environment: pull fields out of a text into JSON matching a schema.

**Task.** A generated paragraph about a fictional person, company or planet (names are made of
random syllables, so no model knows the facts). The prompt gives the text and a JSON Schema;
the model must answer with one JSON object about the entity the question names, with the
values stated in the text. The reference object is ``Task.answer`` (JSON); the schema is
``Task.info["schema"]`` (shown in the prompt on purpose, so it is a public info key).

**Harness.** Single-turn. The answer may be bare JSON, a ```json fence, or one JSON document in
prose (two different documents are a hedge and fail).

**Graders.** ``schema`` (``graders.schema.schema_grader``: valid under the schema, partial credit
for required paths present; weight 0.2) and ``fields`` (``graders.schema.fields_grader``: the
fraction of expected values right, numbers as numbers, strings case- and space-insensitive;
weight 0.8). A perfect answer scores 1.

**Structured outputs** (``response_format=schema``): each sample is drawn with OpenAI's
``response_format`` set to the task's schema (a grammar enforces it in a local model; a server is asked
for it), so the answer is valid JSON under the schema by construction and only the values are the
model's; ``response_format=none`` (default) leaves the answer free.

**Difficulty** (``level``):

=====  ===================================================================================
level  what changes
=====  ===================================================================================
1      three scalar fields, one plain sentence each, no other entity
2      all scalar fields (5-6), sentences shuffled, one distractor entity of the same kind
3      plus a list and a nested object, numbers written with separators ("1,250"),
       booleans stated in words ("is not listed"), two distractor entities
=====  ===================================================================================
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from verigym.envs._args import choice_arg, int_arg
from verigym.envs.base import SingleTurnEnv
from verigym.envs.procedural import ProceduralEnv
from verigym.graders.schema import fields_grader, schema_grader
from verigym.policies.base import Policy
from verigym.policies.scripted import ScriptedPolicy
from verigym.rubric import Rubric
from verigym.types import Message, Sampling, Task, Trajectory

__all__ = ["KINDS", "JsonExtractEnv", "make_entity"]

KINDS = ("person", "company", "planet")
_SYL = [
    "ka",
    "lo",
    "mi",
    "ra",
    "ve",
    "tor",
    "an",
    "bel",
    "cor",
    "dun",
    "esk",
    "fal",
    "gri",
    "hal",
    "ith",
    "jor",
    "kel",
    "lum",
    "mar",
    "nor",
    "ost",
    "pel",
    "quin",
    "ros",
    "sal",
    "tam",
    "ul",
    "vor",
    "wyn",
    "zed",
]
_JOBS = ["baker", "pilot", "architect", "violinist", "geologist", "nurse", "carpenter", "librarian"]
_LANGS = ["Velsh", "Ostrian", "Marani", "Kelt", "Duneric", "Halsic"]
_PRODUCTS = ["lamps", "kettles", "drones", "bicycles", "telescopes", "looms", "pumps", "sensors"]
_STARS = ["Vega Minor", "Tarsis", "Ulmar", "Ithen", "Corvel"]
_GASES = ["nitrogen", "argon", "methane", "oxygen", "neon"]


def _name(rng: random.Random, parts: int = 2) -> str:
    return "".join(rng.choice(_SYL) for _ in range(parts)).capitalize()


def _num(value: int, fancy: bool) -> str:
    return f"{value:,}" if fancy else str(value)


def _person(rng: random.Random, fancy: bool) -> tuple[dict[str, Any], dict[str, str]]:
    first, last = _name(rng), _name(rng, 3)
    city = _name(rng) + "haven"
    obj: dict[str, Any] = {
        "name": f"{first} {last}",
        "age": rng.randint(19, 88),
        "occupation": rng.choice(_JOBS),
        "city": city,
        "email": f"{first.lower()}.{last.lower()}@{_name(rng).lower()}.example",
        "married": rng.random() < 0.5,
        "languages": rng.sample(_LANGS, 2),
        "address": {
            "street": f"{rng.randint(2, 990)} {_name(rng)} Road",
            "postcode": f"{rng.randint(10000, 99999)}",
        },
    }
    n = obj["name"]
    said = {
        "name": f"{n} is the subject of this note.",
        "age": f"{n} is {obj['age']} years old.",
        "occupation": f"{n} works as a {obj['occupation']}.",
        "city": f"{n} lives in {city}.",
        "email": f"{n} can be reached at {obj['email']}.",
        "married": f"{n} is {'married' if obj['married'] else 'not married'}.",
        "languages": f"{n} speaks {obj['languages'][0]} and {obj['languages'][1]}.",
        "address": f"{n}'s home is at {obj['address']['street']}, postcode {obj['address']['postcode']}.",
    }
    return obj, said


def _company(rng: random.Random, fancy: bool) -> tuple[dict[str, Any], dict[str, str]]:
    name = f"{_name(rng)} {rng.choice(['Works', 'Labs', 'Industries', 'Collective'])}"
    obj: dict[str, Any] = {
        "name": name,
        "founded": rng.randint(1890, 2021),
        "employees": rng.randint(12, 48000),
        "headquarters": _name(rng) + "burg",
        "ceo": f"{_name(rng)} {_name(rng, 3)}",
        "public": rng.random() < 0.5,
        "products": rng.sample(_PRODUCTS, 2),
        "office": {"floor": rng.randint(1, 40), "building": f"{_name(rng)} Tower"},
    }
    listed = "is listed on the stock exchange" if obj["public"] else "is not listed on any stock exchange"
    said = {
        "name": f"{name} is the company in question.",
        "founded": f"{name} was founded in {obj['founded']}.",
        "employees": f"{name} employs {_num(obj['employees'], fancy)} people.",
        "headquarters": f"{name} has its headquarters in {obj['headquarters']}.",
        "ceo": f"The chief executive of {name} is {obj['ceo']}.",
        "public": f"{name} {listed}." if fancy else f"{name} is public: {'yes' if obj['public'] else 'no'}.",
        "products": f"{name} makes {obj['products'][0]} and {obj['products'][1]}.",
        "office": f"{name}'s main office is on floor {obj['office']['floor']} of {obj['office']['building']}.",
    }
    return obj, said


def _planet(rng: random.Random, fancy: bool) -> tuple[dict[str, Any], dict[str, str]]:
    name = _name(rng, 3) + "-" + str(rng.randint(2, 9))
    obj: dict[str, Any] = {
        "name": name,
        "star": rng.choice(_STARS),
        "moons": rng.randint(0, 30),
        "radius_km": rng.randint(1500, 70000),
        "day_hours": round(rng.uniform(5, 60), 1),
        "habitable": rng.random() < 0.4,
        "gases": rng.sample(_GASES, 2),
        "discovery": {"year": rng.randint(1950, 2024), "observatory": _name(rng) + " Observatory"},
    }
    hab = "could support life" if obj["habitable"] else "could not support life"
    said = {
        "name": f"{name} is the planet described here.",
        "star": f"{name} orbits the star {obj['star']}.",
        "moons": f"{name} has {obj['moons']} moons.",
        "radius_km": f"The radius of {name} is {_num(obj['radius_km'], fancy)} km.",
        "day_hours": f"A day on {name} lasts {obj['day_hours']} hours.",
        "habitable": f"Astronomers say {name} {hab}."
        if fancy
        else f"{name} habitable: {str(obj['habitable']).lower()}.",
        "gases": f"The air of {name} is mostly {obj['gases'][0]} and {obj['gases'][1]}.",
        "discovery": f"{name} was discovered in {obj['discovery']['year']} by the {obj['discovery']['observatory']}.",
    }
    return obj, said


_MAKERS: dict[str, Callable[[random.Random, bool], tuple[dict[str, Any], dict[str, str]]]] = {
    "person": _person,
    "company": _company,
    "planet": _planet,
}
_CORE = {
    "person": ["name", "age", "occupation"],
    "company": ["name", "founded", "ceo"],
    "planet": ["name", "star", "moons"],
}
_NESTED = {"languages", "address", "products", "office", "gases", "discovery"}


def _schema_of(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, list):
        return {"type": "array", "items": {"type": "string"}}
    if isinstance(value, dict):
        return {
            "type": "object",
            "properties": {k: _schema_of(v) for k, v in value.items()},
            "required": list(value),
            "additionalProperties": False,
        }
    return {"type": "string"}


def make_entity(rng: random.Random, kind: str, level: int) -> tuple[dict[str, Any], str]:
    """``(expected object, text)`` for one entity of ``kind`` at ``level`` (distractors included)."""
    obj, said = _MAKERS[kind](rng, level >= 3)
    if level == 1:
        keys = _CORE[kind]
    else:
        keys = [k for k in obj if level >= 3 or k not in _NESTED]
    sentences = [said[k] for k in keys if k != "name"]
    for _ in range(level - 1):  # distractors: the same kind, different values
        _, other = _MAKERS[kind](rng, level >= 3)
        sentences += rng.sample([v for k, v in other.items() if k != "name"], 2)
    if level >= 2:
        rng.shuffle(sentences)
    return {k: obj[k] for k in keys}, " ".join(sentences)


class JsonExtractEnv(ProceduralEnv, SingleTurnEnv):
    """Extract one entity's fields from a generated text into JSON matching a JSON Schema."""

    name = "json_extract"
    description = (
        "Extract fields from text into JSON matching a schema; schema validity plus field correctness."
    )
    public_info_keys = ("schema",)

    def __init__(
        self,
        level: int = 2,
        size: int = 1000,
        system_prompt: str | None = None,
        response_format: str = "none",
    ) -> None:
        rubric = Rubric([schema_grader(weight=0.2, name="schema"), fields_grader(weight=0.8, name="fields")])
        super().__init__(rubric=rubric, system_prompt=system_prompt)
        self.level = int_arg("json_extract", "level", level, 1, 3)
        self.size = int_arg("json_extract", "size", size, 1, 10**9)
        self.response_format = choice_arg(
            "json_extract", "response_format", response_format, ("none", "schema")
        )

    async def rollout(self, task: Task, policy: Policy, sampling: Sampling) -> Trajectory:
        if self.response_format == "schema":
            fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": task.info["schema"]}}
            sampling = sampling.model_copy(update={"response_format": fmt})
        return await super().rollout(task, policy, sampling)

    def generate(self, rng: random.Random) -> Task:
        kind = rng.choice(KINDS)
        expected, text = make_entity(rng, kind, self.level)
        schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **_schema_of(expected)}
        prompt = (
            f"Read the text and extract the facts about the {kind} {expected['name']} as one JSON object "
            f"matching the JSON Schema below. Use only values stated in the text (lists in the order the text gives them); "
            f"ignore other {kind}s.\n\n"
            f"Text:\n{text}\n\nSchema:\n{json.dumps(schema)}\n\nAnswer with the JSON object only."
        )
        return Task(
            id="",
            prompt=(Message(role="user", content=prompt),),
            answer=json.dumps(expected),
            info={"schema": schema},
        )

    @property
    def task_name(self) -> str:
        return f"json_extract-l{self.level}"

    def oracle_policy(self) -> Policy:
        """Answers the reference object in a ```json fence."""
        return self.task_oracle(lambda task, _: f"```json\n{task.answer}\n```", name="json_extract-oracle")

    def null_policy(self) -> Policy:
        """Answers prose, no JSON."""
        return ScriptedPolicy(lambda messages: "The text describes something.", name="json_extract-null")
