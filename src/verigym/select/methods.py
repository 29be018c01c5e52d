"""Selection methods as registered parts: the ``Selector`` protocol and the one registry of methods.

A selector is ``async (task, candidates, ctx) -> Selection``: it picks among one task's
``candidates`` (in sample order) with the knobs and the judge in ``ctx`` (a ``SelectContext``). A
``Method`` is a selector under a name, with what it needs (top-k logprobs, a judge policy) and how
the tokens it spent are counted. ``verigym select`` (its ``--method`` list, help and errors) and
``verigym.select.run.measure`` both read ``METHODS``; adding a method is one
``register_method(...)`` call::

    async def select_first(task, candidates, ctx):  # the first sample that has an answer
        first = next((c for c in candidates if c.answer is not None), None)
        if first is None:
            return Selection(index=None, method="first")
        return Selection(index=first.index, answer=first.answer, method="first")

    register_method("first", select_first)

Built in, each registered at the bottom of its own module: ``best-of-n`` (``best_of_n``: a
``Grader`` when the config has one, else the judge as a reward model), ``deepconf`` and
``deepconf-online`` (``deepconf``; online is replayed on full traces: its tokens are the ones an
online run would have generated), ``genselect`` and ``majority``. Nothing lists them:
``builtin_modules()`` finds the modules of ``verigym.select`` with a top-level
``register_method(`` call, and the registry (``METHODS``, a ``verigym.registry.Registry``) imports them
on first use, so a new built-in method is one module. ``METHODS`` holds the built-ins by name, then
methods registered later (a user's, or a ``verigym.plugins`` package's) in their order.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from verigym.policies.base import Policy
from verigym.registry import Registry, UnknownNameError
from verigym.rubric import Grader
from verigym.select._common import Candidate, Selection
from verigym.select._confidence import TraceScore
from verigym.types import Sampling, Task

__all__ = [
    "METHODS",
    "Method",
    "SelectConfig",
    "SelectContext",
    "Selector",
    "UnknownMethodError",
    "builtin_modules",
    "default_warmup",
    "get_method",
    "method_names",
    "needs_judge",
    "needs_logprobs",
    "register_method",
    "spent_tokens",
]


@dataclass
class SelectConfig:
    """Knobs of the selection methods (defaults: the papers')."""

    methods: list[str] = field(default_factory=lambda: ["majority"])
    ns: list[int] = field(default_factory=lambda: [1, 4, 16, 64])
    draws: int = 4
    seed: int = 0
    eta: float = 0.1
    score: TraceScore = "lowest"
    window: int = 2048
    fraction: float = 0.25
    k: int = 20
    warmup: int | None = None
    genselect_window: int = 8
    judge_sampling: Sampling = field(default_factory=lambda: Sampling(temperature=0.0, max_tokens=256))
    success_threshold: float = 1.0
    grader: Grader | None = None  # best-of-n scores with this instead of a reward-model policy


@dataclass(frozen=True)
class SelectContext:
    """What a selector may use besides the candidates: the knobs, the judge policy, the draw's seed."""

    config: SelectConfig
    judge: Policy | None = None
    seed: int = 0

    def need_judge(self, method: str) -> Policy:
        """The judge, or ``ValueError`` for a method that cannot run without one."""
        if self.judge is None:
            raise ValueError(f"method {method!r} needs a selector policy")
        return self.judge


class Selector(Protocol):
    """``async (task, candidates, ctx) -> Selection``: pick one of ``candidates`` (or none)."""

    def __call__(
        self, task: Task, candidates: Sequence[Candidate], ctx: SelectContext
    ) -> Awaitable[Selection]: ...


def spent_tokens(candidates: Sequence[Candidate], selection: Selection) -> float:
    """The default token cost: every candidate's tokens plus what the selector itself read and wrote."""
    return float(sum(c.tokens for c in candidates)) + selection.usage.total_tokens


@dataclass(frozen=True)
class Method:
    """A registered selection method (see the module doc)."""

    name: str
    select: Selector
    needs_logprobs: bool = False  # sampling asks for top-k logprobs
    needs_judge: bool = False  # a judge policy (the sampled model unless another is named)
    tokens: Callable[[Sequence[Candidate], Selection], float] = spent_tokens


class UnknownMethodError(UnknownNameError):
    """No selection method has this name (``--method``)."""


def _builtin_methods() -> dict[str, Method]:
    """Import every built-in method module (each registers its methods at its bottom); the methods
    they registered."""
    modules = builtin_modules()
    for module in modules:
        importlib.import_module(module)
    return {n: m for n, m in METHODS.registered().items() if getattr(m.select, "__module__", "") in modules}


METHODS: Registry[Method] = Registry(
    "method", builtins=_builtin_methods, error=UnknownMethodError, sort_builtins=True
)
"""The registry (``verigym.registry.Registry``), in the order ``verigym select`` lists them: the
built-ins by name, then the others (registered, or added by a ``verigym.plugins`` package) in the
order they were registered."""


def register_method(
    name: str,
    select: Selector,
    *,
    needs_logprobs: bool = False,
    needs_judge: bool = False,
    tokens: Callable[[Sequence[Candidate], Selection], float] = spent_tokens,
) -> Method:
    """Add (or replace) the method ``name``; returns its ``Method``."""
    method = Method(name, select, needs_logprobs=needs_logprobs, needs_judge=needs_judge, tokens=tokens)
    METHODS.register(name, method)
    return method


def method_names() -> tuple[str, ...]:
    """The methods' names: the built-ins by name, then the others in registration order."""
    return METHODS.names()


def get_method(name: str) -> Method:
    """The method ``name``; ``UnknownMethodError`` (a ``ValueError``) naming the known ones otherwise."""
    return METHODS.get(name)


def needs_logprobs(methods: Sequence[str]) -> bool:
    """Whether any of ``methods`` needs top-k logprobs (unknown names need nothing)."""
    return any((m := METHODS.find(name)) is not None and m.needs_logprobs for name in methods)


def needs_judge(methods: Sequence[str]) -> bool:
    """Whether any of ``methods`` needs a judge policy (unknown names need nothing)."""
    return any((m := METHODS.find(name)) is not None and m.needs_judge for name in methods)


def default_warmup(n: int) -> int:
    """DeepConf-online warm-up traces at budget N: the paper's 16, at most a quarter of N."""
    return min(16, max(1, n // 4))


# ---- the built-in methods: found, not listed --------------------------------------------------

_REGISTERS = re.compile(r"^register_method\(", re.MULTILINE)


def _registers(path: Path) -> bool:
    return path.is_file() and _REGISTERS.search(path.read_text(encoding="utf-8")) is not None


def builtin_modules() -> tuple[str, ...]:
    """The modules of ``verigym.select`` that register methods (a top-level ``register_method(``
    call in their source), by name; found without importing them."""
    return _method_modules(Path(__file__).parent, __package__ or "verigym.select")


def _method_modules(folder: Path, package: str) -> tuple[str, ...]:
    names = sorted(info.name for info in pkgutil.iter_modules([str(folder)]) if not info.ispkg)
    return tuple(f"{package}.{n}" for n in names if n != "methods" and _registers(folder / f"{n}.py"))


def _register_builtins() -> None:
    """Find the built-in methods now (``verigym.select`` calls this once, last); the registry would
    find them on first use anyway."""
    METHODS.builtin_names  # noqa: B018 (the property looks them up)
