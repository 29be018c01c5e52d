"""The package's layering (docs/architecture.md): imports only go down, and no import cycles.

Every module under ``src/verigym`` is read with ``ast``: module-level, in-function and
``TYPE_CHECKING`` imports all count (a lazy import is still a dependency). Layers, bottom up::

    1 types, _report
    2 tools (and mcp_tools, its old path), rubric, graders, policies
    3 envs
    4 runner, serve
    5 eval, train, data, select, scale
    6 cli, _cli, __main__, and the package's own __init__

A module may import from its own layer or below, never above. Within a layer, packages may use
each other, but neither modules nor top-level packages may import each other in a cycle.
``train`` never imports ``eval`` (both stand on ``runner``).

Public means public: a module whose name starts with ``_`` belongs to the package it sits in, and
only modules inside that package may import it (``verigym._files`` is verigym's, so any of its modules;
``verigym.policies.local._chat`` is ``policies.local``'s, so ``serve`` imports
``verigym.policies.local.chat``). Every
subpackage's ``__init__`` lists its public names in ``__all__``, and each one resolves.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import verigym

LAYERS: dict[str, int] = {
    "types": 1,
    "_report": 1,  # HTML/figure helpers for eval, train and select reports; imports nothing of verigym
    "_files": 1,  # reading user files with one-line errors; writing run files atomically
    "_numbers": 1,  # finite, float32-range config numbers; JSON without Infinity/NaN; imports nothing of verigym
    "_model_files": 1,  # a model folder checked before loading, load failures as one line; nothing of verigym
    "_pass_at_k": 1,  # pass@k defined once, for eval's summary and train's held-out pass@1; imports nothing of verigym  # reading user files (configs, datasets) with one-line errors; imports nothing of verigym
    "testing": 1,  # FakeOpenAIServer for tests and benchmarks; imports only _http_server of verigym
    "_http_server": 1,  # uvicorn with read deadlines and a connection cap for every server; nothing of verigym
    "_asgi_guard": 1,  # API key, body cap and JSON reply as ASGI pieces for every server; nothing of verigym
    "_lazy": 1,  # lazy package names (PEP 562 __getattr__) for the package __init__s; imports nothing of verigym
    "registry": 1,  # Registry[T] and the verigym.plugins group, for every extension axis; nothing of verigym
    "_onednn": 1,  # whether oneDNN's linear is usable and the weight size from which verigym uses it; nothing of verigym
    "_threads": 1,  # worker threads for sync graders (rubric); imports nothing of verigym
    "record": 1,  # the typed, versioned run record (header, summaries, the one fold, read_run); types only
    "_library_output": 1,  # library warnings/log lines to the run log, strict deprecations; imports nothing of verigym
    "tools": 2,
    "rubric": 2,
    "graders": 2,
    "policies": 2,
    "envs": 3,
    "runner": 4,
    "serve": 4,
    "gateway": 4,  # serve's app, recording per rollout session
    "agents": 4,  # an agent program as a harness: envs + the gateway
    "envserver": 4,  # environments served over HTTP (OpenEnv, ORS): envs + runner
    "eval": 5,
    "train": 5,
    "data": 5,
    "select": 5,
    "scale": 5,
    "recipes": 5,  # the quickstart recipes: settings plus calls to train's public API
    "view": 5,  # the browser viewer over run folders (reads eval's comparison statistic)
    "cli": 6,
    "_cli": 6,
    "__main__": 6,
    "_deprecated": 6,  # the old import paths and their removal versions; names modules of every layer
    "": 6,  # verigym/__init__.py, the public API
}
FORBIDDEN = {("train", "eval")}

Graph = dict[str, dict[str, int]]  # module -> {imported module: line}


def _modules(root: Path, package: str) -> dict[str, Path]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def import_graph(root: Path, package: str = "verigym") -> Graph:
    """Every module of the package under ``root`` and the package modules it imports (with the line)."""
    modules = _modules(root, package)
    graph: Graph = {}
    for name, path in modules.items():
        is_pkg = path.name == "__init__.py"
        here = name.split(".") if is_pkg else name.split(".")[:-1]
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    stem = here[: len(here) - node.level + 1]
                    base = ".".join([*stem, base] if base else stem)
                # ``from pkg import sub`` imports the submodule when there is one.
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                while target and target not in modules:  # ``import a.b.c`` of a name, not a module
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.setdefault(target, node.lineno)
        graph[name] = edges
    return graph


_DOTTED = re.compile(r"(?P<module>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?::[A-Za-z_]\w*)?")


def string_imports(root: Path, package: str = "verigym") -> Graph:
    """Modules named by a whole string constant (``"pkg.envs.x"`` or ``"pkg.envs.x:Attr"``): an import
    by name through ``importlib`` or a table is still a dependency, so it obeys the same layers."""
    modules = _modules(root, package)
    graph: Graph = {}
    for name, path in modules.items():
        edges: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                match = _DOTTED.fullmatch(node.value)
                if match and match["module"] in modules and match["module"] != name:
                    edges.setdefault(match["module"], node.lineno)
        graph[name] = edges
    return graph


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer_violations(graph: Graph, layers: Mapping[str, int] = LAYERS) -> list[str]:
    problems = []
    for module, edges in sorted(graph.items()):
        if _part(module) not in layers:
            problems.append(
                f"{module}: '{_part(module)}' has no layer; add it to LAYERS and docs/architecture.md"
            )
        for target, line in sorted(edges.items()):
            a, b = _part(module), _part(target)
            if a in layers and b in layers and layers[b] > layers[a]:
                problems.append(
                    f"{module}:{line} imports {target} (layer {layers[b]} '{b}' is above layer {layers[a]} '{a}')"
                )
            if (a, b) in FORBIDDEN:
                problems.append(f"{module}:{line} imports {target} ('{a}' must never import '{b}')")
    return sorted(set(problems))


def private_owner(module: str) -> str | None:
    """The package a private module belongs to (the parent of its first ``_name`` part), or None."""
    parts = module.split(".")
    for i, part in enumerate(parts[1:], start=1):
        if part.startswith("_") and part != "__main__":
            return ".".join(parts[:i])
    return None


def private_imports(graph: Graph) -> list[str]:
    """Imports of a private module from outside the package that owns it."""
    problems = []
    for module, edges in sorted(graph.items()):
        for target, line in sorted(edges.items()):
            owner = private_owner(target)
            if owner is not None and module != owner and not module.startswith(owner + "."):
                problems.append(
                    f"{module}:{line} imports {target}, private to {owner}: import a public module or "
                    f"an export of {owner}'s __init__ instead"
                )
    return problems


def cycles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def package_graph(graph: Graph) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for module, edges in graph.items():
        a = _part(module)
        out.setdefault(a, set()).update(b for b in map(_part, edges) if b != a)
    return out


def _cycle_lines(graph: Graph, component: list[str]) -> str:
    members = set(component)
    return "; ".join(
        f"{m}:{line} -> {t}" for m in component for t, line in sorted(graph[m].items()) if t in members
    )


ROOT = Path(verigym.__file__).resolve().parent


def test_no_module_imports_from_a_higher_layer() -> None:
    problems = layer_violations(import_graph(ROOT))
    assert not problems, "\n".join(problems)


def test_no_module_names_a_higher_layer_module_in_a_string() -> None:
    problems = layer_violations(string_imports(ROOT))  # e.g. a table of modules imported by name
    assert not problems, "\n".join(problems)


def test_no_module_imports_another_packages_private_module() -> None:
    problems = private_imports(import_graph(ROOT))
    assert not problems, "\n".join(problems)


def test_every_public_subpackage_exports_its_names() -> None:
    packages = sorted(
        name
        for name, path in _modules(ROOT, "verigym").items()
        if path.name == "__init__.py" and name != "verigym" and private_owner(name) is None
    )
    assert "verigym.policies" in packages and "verigym.graders.math" in packages
    for name in packages:
        package = importlib.import_module(name)
        exported = getattr(package, "__all__", None)
        assert exported is not None, f"{name}/__init__.py: list the package's public names in __all__"
        missing = [n for n in exported if not hasattr(package, n)]
        assert not missing, f"{name}.__all__ names what it does not have: {missing}"
    from verigym.policies import OpenAIPolicy  # the public path, not verigym.policies.openai

    assert OpenAIPolicy.__module__ == "verigym.policies.openai"


def test_no_import_cycles_between_modules() -> None:
    graph = import_graph(ROOT)
    found = cycles(graph)
    assert not found, "\n".join(_cycle_lines(graph, c) for c in found)


def test_no_import_cycles_between_top_level_packages() -> None:
    found = cycles(package_graph(import_graph(ROOT)))
    assert not found, f"top-level packages import each other: {found}"


def test_every_graders_family_has_a_documented_init() -> None:
    graders = ROOT / "graders"
    for family in sorted(p for p in graders.iterdir() if (p / "__init__.py").exists()):
        doc = ast.get_docstring(ast.parse((family / "__init__.py").read_text())) or ""
        assert "tests/suites/" in doc, f"graders/{family.name}/__init__.py: say where its labeled suite is"


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / "pkg" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_the_checks_catch_an_upward_import_inside_a_function_and_a_cycle(tmp_path: Path) -> None:
    pkg = _write(
        tmp_path,
        {
            "__init__.py": "",
            "types.py": "def f():\n    from pkg.envs import base\n",  # lazy, still upward
            "envs/__init__.py": "",
            "envs/base.py": "from pkg.envs import tool\n",
            "envs/tool.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .base import X\n",
            "graders/__init__.py": "",
            "graders/math.py": "from pkg import types\n",
            "graders/bench.py": "TABLE = {'fix': 'pkg.envs.tool', 'doc': 'see pkg.envs.tool'}\n",
            "graders/_rules.py": "",
            "policies/__init__.py": "",
            "policies/_chat.py": "from pkg.graders import _rules\n",  # private to graders
            "policies/chat.py": "from pkg.policies._chat import x\nfrom pkg import _files\n",
            "_files.py": "",
        },
    )
    graph = import_graph(pkg, "pkg")
    assert graph["pkg.types"] == {"pkg.envs.base": 2}
    assert graph["pkg.graders.math"] == {"pkg.types": 1}
    assert layer_violations(graph) == [
        "pkg.types:2 imports pkg.envs.base (layer 3 'envs' is above layer 1 'types')"
    ]
    assert cycles(graph) == [["pkg.envs.base", "pkg.envs.tool"]]
    assert layer_violations(string_imports(pkg, "pkg")) == [
        "pkg.graders.bench:1 imports pkg.envs.tool (layer 3 'envs' is above layer 2 'graders')"
    ]
    assert cycles(package_graph(graph)) == []
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert private_imports(graph) == [
        "pkg.policies._chat:1 imports pkg.graders._rules, private to pkg.graders: import a public module "
        "or an export of pkg.graders's __init__ instead"
    ]


# One road from a model name to a policy (issue 40 item 1, docs/architecture.md): weights are opened by
# the opener alone (``policies.spec.open_model``/``load_weights`` over ``policies.local._loading``); the
# other loads below read weights into something already open, each for the reason given.
LOADERS = ("AutoModelForCausalLM", "AutoTokenizer", "AutoModel", "LocalPolicy")
ROAD = {
    "verigym.policies.local._loading": "the opener's loading (load_pretrained)",
    "verigym.policies.catalogue": "converts a pulled GGUF into a model directory and checks the copy",
    "verigym.train.rl": "resume reloads the frozen KL reference model a checkpoint saved beside the policy",
    "verigym.serve._weights": "reads a pushed checkpoint's tensors into the served policy (swap_weights)",
}


def other_roads(root: Path, package: str = "verigym", allowed: Mapping[str, str] = ROAD) -> list[str]:
    """Model loads (``X.from_pretrained(...)`` for X a transformers auto class or ``LocalPolicy``)
    outside the opener and ``allowed``, and any reach into another object's ``_lock`` (a policy's lock
    is taken through ``LocalPolicy.swap_weights``) outside ``policies.local``."""
    problems = []
    for name, path in _modules(root, package).items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "from_pretrained"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id in LOADERS
                and name not in allowed
            ):
                problems.append(
                    f"{name}:{node.lineno} opens a model with {node.func.value.id}.from_pretrained: open it "
                    "through verigym.policies.spec.open_model / load_weights (verigym.train.load_model)"
                )
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "_lock"
                and not (isinstance(node.value, ast.Name) and node.value.id == "self")
                and not name.startswith(f"{package}.policies.local")
            ):
                problems.append(f"{name}:{node.lineno} takes another object's _lock: use swap_weights")
    return sorted(problems)


def test_every_model_is_opened_through_the_one_opener() -> None:
    problems = other_roads(ROOT)
    assert not problems, "\n".join(problems)
    for module in ROAD:
        assert module in _modules(ROOT, "verigym"), f"ROAD names {module}, which no longer exists"


def test_the_road_check_catches_another_road(tmp_path: Path) -> None:
    pkg = _write(
        tmp_path,
        {
            "__init__.py": "",
            "cli.py": "def f(p):\n    return LocalPolicy.from_pretrained(p)\n",
            "serve/x.py": "def g(policy):\n    with policy._lock:\n        pass\n",
            "policies/local/y.py": "def h(self, other):\n    with self._lock, other._lock:\n        pass\n",
            "train/z.py": "def k(p):\n    return AutoModelForCausalLM.from_pretrained(p)\n",
        },
    )
    assert other_roads(pkg, "pkg", {"pkg.train.z": "a reason"}) == [
        "pkg.cli:2 opens a model with LocalPolicy.from_pretrained: open it through "
        "verigym.policies.spec.open_model / load_weights (verigym.train.load_model)",
        "pkg.serve.x:2 takes another object's _lock: use swap_weights",
    ]
