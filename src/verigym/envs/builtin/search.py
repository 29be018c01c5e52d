"""The built-in ``search`` environment: multi-hop questions over a generated knowledge base.

**Task.** A seeded knowledge base of fictional people, companies, cities and countries (names
drawn from syllables, so no model knows them from pre-training) and a question that chains
``hops`` relations, e.g. *"What is the founding year of the employer of Talvo Merrin?"* (2 hops:
Talvo Merrin -> his employer -> its founding year). Answers are exact: a name or an integer.

**Harness.** ``ToolEnv`` with two tools: ``search(query)`` returns the best-matching entity ids
and names; ``open(entity_id)`` returns an entity's page (its attributes and linked entities with
their ids). The model answers in a final message ending with ``Answer: ...``.

**Graders.** ``correct``: the text after the last ``Answer:`` (else the last line), case- and
punctuation-folded, equals the reference. Weight 1.

**Difficulty.** ``level`` = hops (1-4): how many pages must be chained. ``kb_size`` sets how
many people the knowledge base holds (more near-duplicate names to search through). The
knowledge base depends on ``kb_seed`` only; tasks on ``(seed, split, index)``.

**Oracle.** Finds the task by its prompt, opens each entity of the hidden path in turn through
the same tools, then answers the reference. The null policy answers "I don't know." at once.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from verigym.envs._args import int_arg
from verigym.envs.procedural import ProceduralEnv
from verigym.envs.tool import ToolEnv
from verigym.graders.format import extract_answer_line, strip_think
from verigym.policies.base import Policy
from verigym.policies.scripted import Reply, ScriptedPolicy
from verigym.rubric import Grader, Rubric
from verigym.tools import Tool
from verigym.types import Grade, Message, Task, ToolCall, Trajectory

__all__ = ["Entity", "KnowledgeBase", "SearchEnv", "build_kb", "normalize_answer"]

_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "th", "br", "kr", "st")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ou", "ea")
_CODAS = ("", "", "n", "r", "s", "l", "th", "x")

# relation -> (source type, target type, noun phrase with {x})
_RELATIONS: dict[str, tuple[str, str, str]] = {
    "born_in": ("person", "city", "the birthplace of {x}"),
    "works_for": ("person", "company", "the employer of {x}"),
    "headquarters": ("company", "city", "the headquarters city of {x}"),
    "founder": ("company", "person", "the founder of {x}"),
    "country": ("city", "country", "the country of {x}"),
    "capital": ("country", "city", "the capital of {x}"),
}
# attribute -> (entity type, noun)
_ATTRIBUTES: dict[str, tuple[str, str]] = {
    "birth_year": ("person", "birth year"),
    "founded": ("company", "founding year"),
    "population": ("city", "population"),
    "area_km2": ("country", "area in square kilometres"),
}
_LABELS = {
    "born_in": "Born in",
    "works_for": "Works for",
    "headquarters": "Headquarters",
    "founder": "Founder",
    "country": "Country",
    "capital": "Capital",
    "birth_year": "Birth year",
    "founded": "Founded",
    "population": "Population",
    "area_km2": "Area (km2)",
}


@dataclass
class Entity:
    id: str
    kind: str
    name: str
    links: dict[str, str] = field(default_factory=dict)  # relation -> entity id
    attrs: dict[str, int] = field(default_factory=dict)


@dataclass
class KnowledgeBase:
    entities: dict[str, Entity]

    def by_kind(self, kind: str) -> list[Entity]:
        return [e for e in self.entities.values() if e.kind == kind]

    def page(self, entity_id: str) -> str:
        e = self.entities.get(entity_id.strip())
        if e is None:
            return f"No entity with id {entity_id!r}. Use search to find ids."
        lines = [f"{e.name} ({e.id}), a {e.kind}."]
        for rel, target in e.links.items():
            lines.append(f"{_LABELS[rel]}: {self.entities[target].name} ({target})")
        for attr, value in e.attrs.items():
            lines.append(f"{_LABELS[attr]}: {value}")
        return "\n".join(lines)

    def search(self, query: str, limit: int = 5) -> str:
        words = set(re.findall(r"\w+", query.casefold()))
        if not words:
            return "Empty query: give some words of the name you are looking for."
        scored = []
        for e in self.entities.values():
            tokens = set(re.findall(r"\w+", e.name.casefold())) | {e.kind}
            hit = len(words & tokens)
            if hit:
                scored.append((-hit, e.id, e))
        scored.sort()
        if not scored:
            return f"No results for {query!r}."
        return "\n".join(f"{e.id}: {e.name} ({e.kind})" for _, _, e in scored[:limit])


def _word(rng: random.Random, syllables: int) -> str:
    parts = [rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables)]
    return ("".join(parts) + rng.choice(_CODAS)).capitalize()


def build_kb(seed: int, people: int = 60) -> KnowledgeBase:
    """The knowledge base for ``seed``: ``people`` people and about a third as many companies,
    cities and countries, every name unique and every relation filled."""
    rng = random.Random(f"verigym/search-kb/{seed}")
    used: set[str] = set()

    def name(parts: int) -> str:
        while True:
            text = " ".join(_word(rng, rng.randint(1, 2)) for _ in range(parts))
            if text not in used:
                used.add(text)
                return text

    n_group = max(3, people // 3)
    countries = [Entity(f"N{i:03d}", "country", name(1) + "ia") for i in range(max(2, n_group // 3))]
    cities = [Entity(f"C{i:03d}", "city", name(1)) for i in range(n_group)]
    companies = [Entity(f"O{i:03d}", "company", name(1) + " " + rng.choice(("Corp", "Labs", "Works", "Group"))) for i in range(n_group)]  # fmt: skip
    persons = [Entity(f"P{i:03d}", "person", name(2)) for i in range(people)]
    for i, c in enumerate(cities):
        c.links["country"] = countries[i % len(countries)].id
        c.attrs["population"] = rng.randint(2_000, 900_000)
    for i, n in enumerate(countries):
        n.links["capital"] = cities[i].id
        n.attrs["area_km2"] = rng.randint(1_000, 500_000)
    for p in persons:
        p.links["born_in"] = rng.choice(cities).id
        p.links["works_for"] = rng.choice(companies).id
        p.attrs["birth_year"] = rng.randint(1940, 2004)
    for o in companies:
        o.links["headquarters"] = rng.choice(cities).id
        o.links["founder"] = rng.choice(persons).id
        o.attrs["founded"] = rng.randint(1850, 2020)
    everything = [*countries, *cities, *companies, *persons]
    return KnowledgeBase({e.id: e for e in everything})


def normalize_answer(text: str) -> str:
    """Casefolded, punctuation-free, single-spaced; thousands separators dropped from numbers."""
    text = re.sub(r"(?<=\d)[,_](?=\d{3})", "", text.casefold())
    text = re.sub(r"[^\w\s]", " ", text)
    return " ".join(text.split())


def correct(task: Task, trajectory: Trajectory) -> Grade:
    """1 when the final answer equals the reference after ``normalize_answer``."""
    if task.answer is None:
        raise ValueError(f"task {task.id} has no reference answer")
    text = strip_think(trajectory.final_text).strip()
    got = extract_answer_line(text)
    if got is None:
        lines = [line for line in text.splitlines() if line.strip()]
        got = lines[-1] if lines else ""
    ok = normalize_answer(got) == normalize_answer(task.answer)
    return Grade(score=float(ok), detail=f"expected {task.answer!r}, got {got[:80]!r}")


SYSTEM_PROMPT = (
    "Answer the question using the knowledge-base tools: one finds entities by name, another "
    "shows an entity's page with its links. Follow the links one hop at a time. "
    "End your final message with a line 'Answer: <answer>' (a name or a number)."
)


class SearchEnv(ProceduralEnv, ToolEnv):
    """Multi-hop questions over a generated knowledge base behind search/open tools."""

    name = "search"
    description = "Multi-hop questions over a generated knowledge base behind search/open tools."

    def __init__(
        self,
        level: int = 2,
        kb_seed: int = 0,
        kb_size: int = 60,
        max_turns: int = 12,
        size: int = 1000,
        system_prompt: str | None = SYSTEM_PROMPT,
        tool_variant: int | None = None,
    ) -> None:
        self.level = int_arg("search", "level", level, 1, 4)
        self.kb_seed = int_arg("search", "kb_seed", kb_seed, 0, 2**31)
        self.kb_size = int_arg("search", "kb_size", kb_size, 6, 100_000)
        self.size = int_arg("search", "size", size, 1, 10**9)
        self._kb: KnowledgeBase | None = None
        tools = [
            Tool.from_function(self._search, name="search"),
            Tool.from_function(self._open, name="open"),
        ]
        super().__init__(
            tools,
            rubric=Rubric([Grader(correct, name="correct")]),
            system_prompt=system_prompt,
            max_turns=int_arg("search", "max_turns", max_turns, 1, 1000),
            tool_variant=tool_variant,
        )

    @property
    def kb(self) -> KnowledgeBase:
        if self._kb is None:
            self._kb = build_kb(self.kb_seed, self.kb_size)
        return self._kb

    def _search(self, query: str) -> str:
        """Search the knowledge base by name; returns up to 5 matching entity ids and names.

        Args:
            query: words of the name (or the kind: person, company, city, country).
        """
        return self.kb.search(query)

    def _open(self, entity_id: str) -> str:
        """Open an entity's page: its attributes and the ids of the entities it links to.

        Args:
            entity_id: an id from the search results or from another page.
        """
        return self.kb.page(entity_id)

    def generate(self, rng: random.Random) -> Task:
        kb = self.kb
        for _ in range(200):
            start = rng.choice(kb.by_kind("person"))
            path = [start.id]
            phrase = start.name
            node = start
            ask_attr = rng.random() < 0.5
            steps = self.level - 1 if ask_attr else self.level
            for _ in range(steps):
                rel = rng.choice(sorted(node.links))
                phrase = _RELATIONS[rel][2].format(x=phrase)
                node = kb.entities[node.links[rel]]
                path.append(node.id)
            if ask_attr:
                attr = next(a for a, (kind, _) in _ATTRIBUTES.items() if kind == node.kind)
                question = f"What is the {_ATTRIBUTES[attr][1]} of {phrase}?"
                answer = str(node.attrs[attr])
            else:
                question = f"What is the name of {phrase}?"
                answer = node.name
            if normalize_answer(answer) not in normalize_answer(question):
                break
        text = f"{question}\nEnd with 'Answer: <answer>'."
        info: dict[str, Any] = {"path": path, "hops": self.level}
        return Task(id="", prompt=(Message(role="user", content=text),), answer=answer, info=info)

    @property
    def task_name(self) -> str:
        return f"search-h{self.level}-kb{self.kb_seed}x{self.kb_size}"

    def oracle_policy(self) -> Policy:
        """Opens each entity of the hidden path in turn, then answers the reference."""

        def solve(task: Task, messages: Sequence[Message]) -> Reply:
            path: list[str] = task.info["path"]
            opened = sum(1 for m in messages if m.role == "tool")
            if opened < len(path):
                call = ToolCall(
                    id=f"call-{opened}", name="open", arguments=f'{{"entity_id": "{path[opened]}"}}'
                )
                return "", [call]
            return f"Following the pages, the answer is found.\nAnswer: {task.answer}"

        return self.task_oracle(solve, name="search-oracle")

    def null_policy(self) -> Policy:
        return ScriptedPolicy(lambda messages: "I don't know.", name="search-null")
