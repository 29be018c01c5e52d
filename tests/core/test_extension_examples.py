"""The worked examples of docs/architecture.md ("Worked examples: extending verigym") run as written:
a loss through an RL update named by its config, a selector through the registry ``run.measure``
and ``verigym select --method`` read, an environment through ``load_env`` and ``check_env``. And the
built-ins are found with no table to edit, checked by properties rather than golden lists (a new
built-in environment or selector is its module and its test, nothing else); every axis is one
``verigym.registry.Registry`` (``tests/core/test_plugins.py`` adds one of each from a package)."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from verigym._cli.select_cmd import _methods
from verigym.envs import registry
from verigym.envs.check import check_env
from verigym.envs.registry import list_envs, load_env
from verigym.select import METHODS, Candidate, get_method, method_names
from verigym.select.methods import SelectConfig, _method_modules, builtin_modules
from verigym.select.run import TaskPool, measure
from verigym.train import loss_registry as R
from verigym.train import losses as L
from verigym.train._update import UpdateState, policy_update
from verigym.train.config import ConfigError, build_config, load_config
from verigym.train.optim import make_scheduler
from verigym.train.samples import Row
from verigym.types import Message, Task

DOC = Path(__file__).parents[2] / "docs" / "architecture.md"

torch.set_num_threads(1)


def example(heading: str) -> str:
    """The one ``python`` block under the worked example whose heading starts with ``heading``."""
    section = DOC.read_text(encoding="utf-8").split("## Worked examples: extending verigym", 1)[1]
    parts = [p for p in re.split(r"^### ", section, flags=re.MULTILINE) if p.startswith(heading)]
    assert len(parts) == 1, heading
    blocks = re.findall(r"^```python\n(.*?)^```$", parts[0], flags=re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1, heading
    return str(blocks[0])


def write_module(folder: Path, name: str, code: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(code, encoding="utf-8")
    return path


def import_from(folder: Path, module: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(folder))
    return importlib.import_module(module)


@pytest.fixture
def reinforce(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    write_module(tmp_path, "docs_reinforce", example("A loss"))
    try:
        yield import_from(tmp_path, "docs_reinforce", monkeypatch)
    finally:
        R.LOSSES.pop("reinforce", None)  # other tests see the built-in losses only
        sys.modules.pop("docs_reinforce", None)


@pytest.fixture
def shortest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    package = tmp_path / "docs_select"
    write_module(package, "__init__", "")
    write_module(package, "shortest", example("A selection method"))
    # found as select.methods finds a built-in: by its top-level register_method( call
    found = _method_modules(package, "docs_select")
    assert found == ("docs_select.shortest",)
    try:
        import_from(tmp_path, found[0], monkeypatch)
        yield "shortest"
    finally:
        METHODS.pop("shortest", None)
        for module in ("docs_select.shortest", "docs_select"):
            sys.modules.pop(module, None)


def test_the_loss_example_trains_through_its_config_name(reinforce: ModuleType, tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[rl]\nkl_beta = 0.0\nloss = {kind = "reinforce", baseline = 0.5}\n')
    rl = load_config(config).rl
    assert rl.loss == "reinforce" and rl.loss_options == reinforce.ReinforceOptions(baseline=0.5)
    flat = build_config({"rl": {"loss": "reinforce", "max_ratio": 4.0}}).rl.loss_options
    assert flat == reinforce.ReinforceOptions(max_ratio=4.0)
    with pytest.raises(
        ConfigError, match=r"eps_high: unknown key \(loss reinforce takes baseline, max_ratio\)"
    ):
        build_config({"rl": {"loss": {"kind": "reinforce", "eps_high": 0.3}}})

    seen: list[Any] = []
    spec = R.LOSSES["reinforce"]

    def recorded(x: R.LossInputs, o: Any) -> L.PolicyLoss:
        seen.append(o)
        return spec.fn(x, o)  # type: ignore[no-any-return]

    R.LOSSES["reinforce"] = R.LossSpec("reinforce", spec.options, recorded)  # the fixture removes it
    from verigym.policies.tiny import build_model, build_tokenizer

    model = build_model("tiny", build_tokenizer(), seed=0)
    before = [p.detach().clone() for p in model.parameters()]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    state = UpdateState(opt, make_scheduler(opt, "constant", 0, 10), torch.Generator())
    rows = [
        Row(ids=[5, 17, 11, 82, 10, 11, 12, 2], mask=[0, 0, 0, 0, 1, 1, 1, 1], logprobs=None, advantage=a)
        for a in (1.0, -1.0)
    ]
    metrics = policy_update(model, rows, rl, state, pad_id=0, temperature=1.0, max_len=8)
    assert seen and all(o == reinforce.ReinforceOptions(baseline=0.5) for o in seen)
    assert all(torch.isfinite(torch.tensor(v)) for v in metrics.values())
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def _pool(tokens: list[int], answers: list[str | None], right: str) -> TaskPool:
    task = Task(id=f"t{right}", prompt=(Message(role="user", content="q"),), answer=right)
    cands = [
        Candidate(index=i, text=str(a), answer=a, tokens=n, correct=a == right)
        for i, (n, a) in enumerate(zip(tokens, answers, strict=True))
    ]
    return TaskPool(task=task, candidates=cands)


async def test_the_selector_example_is_measured_and_accepted_by_verigym_select(shortest: str) -> None:
    assert shortest in method_names() and method_names()[-1] == shortest  # after the built-ins
    assert _methods([f"{shortest},majority"]) == [shortest, "majority"]  # --method's check
    pools = [_pool([9, 3, 5], ["8", "7", "8"], "7"), _pool([4, 2, 2], ["5", None, "6"], "5")]
    points = await measure(pools, SelectConfig(methods=[shortest, "majority"], ns=[3], draws=1))
    assert [p.accuracy for p in points[shortest]] == [0.5]  # picks "7" (3 tokens), then "6" (2, earliest)
    assert [p.accuracy for p in points["majority"]] == [0.5]
    assert points[shortest][0].tokens == 12.5  # every candidate's tokens: the default cost
    assert get_method(shortest).needs_judge is False


def test_the_environment_example_loads_rolls_out_and_grades(tmp_path: Path) -> None:
    path = write_module(tmp_path, "reverse", example("An environment"))
    # found as the registry finds a built-in: the class that sets name = "reverse"
    assert registry._declared(path) == {
        "reverse": registry._Entry(
            "verigym.envs.builtin.reverse:ReverseEnv", "Write a string backwards; exact match."
        )
    }
    env = load_env(f"{path}:ReverseEnv", size=20)
    assert env.name == "reverse" and [g.name for g in env.rubric.graders] == ["reversed"]
    report = check_env(env, n=6)
    assert report.ok, report.failures
    statuses = {r.name: r.status for r in report.results}
    assert statuses["oracle"] == statuses["null"] == statuses["graders"] == "pass"


def test_built_in_environments_are_found_without_a_table() -> None:
    """Properties, not a golden list: every class of a public ``verigym.envs.builtin`` module that
    declares ``name = "..."`` is a built-in under that name (no name twice), its target imports to that
    class, an ``Environment``, described as it says; listing imports none of them. The framework
    modules of ``verigym.envs`` declare none (the built-ins all live in ``envs/builtin/``)."""
    from verigym.envs.base import Environment

    builtins = registry._builtins()
    declared = [n for p in sorted(registry._HERE.glob("[!_]*.py")) for n in registry._declared(p)]
    assert sorted(declared) == sorted(builtins)  # no name declared twice
    assert registry.ENVS.builtin_names == tuple(builtins) and len(builtins) >= 10
    for name, entry in builtins.items():
        module, _, attr = str(entry.target).partition(":")
        assert module.startswith("verigym.envs.builtin.") and module.count(".") == 3, entry.target
        cls = getattr(importlib.import_module(module), attr)
        assert isinstance(cls, type) and issubclass(cls, Environment), entry.target
        assert cls.name == name and list_envs()[name] == entry.description == cls.description
        assert registry._builtin(name) == entry
    assert type(load_env("arithmetic")).__module__ == "verigym.envs.builtin.arithmetic"
    framework = sorted(registry._HERE.parent.glob("[!_]*.py"))
    assert len(framework) >= 8 and not any(registry._declared(p) for p in framework)
    # listing reads source: no built-in module is imported
    code = (
        "import sys; from verigym.envs.registry import list_envs; names = list_envs(); "
        "assert 'tools_user' in names, names; "
        "print(sorted(m for m in sys.modules if m.startswith('verigym.envs.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['verigym.envs.base', 'verigym.envs.registry']"


def test_built_in_selection_methods_are_found_without_a_list() -> None:
    """Properties, not a golden list: the built-in method modules are exactly the ``verigym.select``
    modules with a top-level ``register_method(`` call; every method they register is a built-in,
    listed first and by name; ``methods`` registers none itself."""
    folder = Path(importlib.import_module("verigym.select").__file__ or "").parent
    calls = {
        f"verigym.select.{p.stem}"
        for p in folder.glob("*.py")
        if re.search(r"^register_method\(", p.read_text(encoding="utf-8"), flags=re.MULTILINE)
    }
    assert builtin_modules() == tuple(sorted(calls)) and "verigym.select.methods" not in calls
    builtins = METHODS.builtin_names
    assert builtins == tuple(sorted(builtins)) and method_names()[: len(builtins)] == builtins
    owners = {name: get_method(name).select.__module__ for name in method_names()}
    assert {n for n, m in owners.items() if m in calls} == set(builtins)
    assert set(owners[n] for n in builtins) == calls  # every module registers at least one


def test_every_registry_lists_what_it_gives() -> None:
    """The five axes are one primitive: each lists its names, gives each, and refuses an unknown one
    in one line naming them all."""
    from verigym.graders.families import FAMILIES
    from verigym.policies.local.chat import TOOL_FORMATS
    from verigym.registry import Registry, UnknownNameError

    for reg in (registry.ENVS, METHODS, R.LOSSES, FAMILIES, TOOL_FORMATS):
        assert isinstance(reg, Registry) and reg.names()
        for name in reg.names():
            assert reg.find(name) is not None, (reg.kind, name)
        with pytest.raises(UnknownNameError) as err:
            reg.get("no-such-name")
        message = str(err.value)
        assert (
            message.startswith(f"unknown {reg.kind} 'no-such-name'; expected one of ") and "\n" not in message
        )
        assert all(name in message for name in reg.names())
