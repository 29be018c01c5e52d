"""The worked example of ``verigym.plugins`` (issue 40 item 2): a package outside verigym adds an
environment, a selection method, a loss, a grader family and a tool-call format through one entry
point, and each is reached from a ``verigym`` command. The package is
``tests/fixtures/plugin_demo/verigym_plugin_demo``; the test "installs" it as pip would leave it (the
package and a ``.dist-info`` with ``entry_points.txt``) in a folder put on the path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from verigym import registry
from verigym.cli import app
from verigym.envs import registry as envs
from verigym.graders.families import FAMILIES, find_family
from verigym.policies.local.chat import TOOL_FORMATS
from verigym.policies.spec import ModelSpec, open_model
from verigym.select.methods import METHODS, get_method, method_names
from verigym.train.loss_registry import LOSSES, get_loss

PACKAGE = Path(__file__).resolve().parents[1] / "fixtures" / "plugin_demo" / "verigym_plugin_demo"
runner = CliRunner()
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def install(site: Path, entry_points: str, name: str = "verigym_plugin_demo") -> Path:
    """The package and its distribution's metadata in ``site``, as an installer writes them."""
    if not (site / "verigym_plugin_demo").exists():
        shutil.copytree(PACKAGE, site / "verigym_plugin_demo")
    info = site / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)
    return site


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on the path holding the plugin package; every registry is restored afterwards."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    described = dict(envs._DESCRIBED)
    with envs.ENVS.scoped(), METHODS.scoped(), LOSSES.scoped(), FAMILIES.scoped(), TOOL_FORMATS.scoped():
        registry.forget_plugins()
        try:
            yield folder
        finally:
            for module in [m for m in sys.modules if m.startswith("verigym_plugin_demo")]:
                del sys.modules[module]
            envs._DESCRIBED.clear()
            envs._DESCRIBED.update(described)
    registry.forget_plugins()  # the next test reads the group without this folder


def test_one_entry_point_adds_one_of_each_axis_on_an_unknown_name(site: Path) -> None:
    install(site, "[verigym.plugins]\ndemo = verigym_plugin_demo\n")
    assert "verigym_plugin_demo" not in sys.modules  # nothing is loaded before a name is missed
    env = envs.load_env("demo_echo")  # an unknown name: the group is read, the package imported
    assert "verigym_plugin_demo" in sys.modules and env.name == "demo_echo"
    assert get_method("demo_longest").select.__name__ == "select_longest"
    assert method_names()[-1] == "demo_longest" and method_names()[0] == "best-of-n"  # built-ins first
    assert get_loss("demo_reinforce").options.__name__ == "DemoOptions"
    assert find_family("demo_exact").source == "verigym_plugin_demo.family"
    fmt = TOOL_FORMATS["demo_xml"]
    parsed = fmt.parse('Sure. <call name="add">{"a": 1}</call>', salt="s")
    assert parsed.content == "Sure." and [c.name for c in parsed.calls] == ["add"]
    assert fmt.render_call([{"name": "add", "arguments": {"a": 1}}]) == '<call name="add">{"a": 1}</call>'
    assert envs.list_envs()["demo_echo"].startswith("Say the given word back")
    policy = open_model(ModelSpec(model="tiny", tool_format="demo_xml")).policy
    assert policy.tool_format == "demo_xml"  # type: ignore[attr-defined]


def _ok(args: list[str]) -> str:
    result = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    return str(result.output)


def test_each_axis_is_reached_from_a_verigym_command(site: Path, tmp_path: Path) -> None:
    install(site, "[verigym.plugins]\ndemo = verigym_plugin_demo\n")
    assert "demo_echo" in _ok(["envs"])
    # the environment, through its oracle
    _ok(["eval", "demo_echo", "--policy", "oracle", "-n", "3", "--out", str(tmp_path / "e")])
    summary = json.loads((tmp_path / "e" / "summary.json").read_text())
    assert summary["reward_mean"] == 1.0 and summary["n_samples"] == 3
    # the tool format, on an in-process model
    _ok(["eval", "arithmetic", "--model", "tiny", "--tool-format", "demo_xml", "-n", "1",
         "--max-tokens", "2", "--threads", "1", "--out", str(tmp_path / "t")])  # fmt: skip
    assert json.loads((tmp_path / "t" / "config.json").read_text())["config"]["tool_format"] == "demo_xml"
    # the selection method
    _ok(["select", "arithmetic", "--method", "demo_longest,majority", "--model", "tiny", "-n", "2", "-N", "2",
         "--max-tokens", "2", "--threads", "1", "--out", str(tmp_path / "s")])  # fmt: skip
    assert "demo_longest" in (tmp_path / "s" / "summary.json").read_text()
    # the grader family
    suite = tmp_path / "suite.jsonl"
    lines = [
        {"id": "a", "gold": "4", "pred": "4", "label": True},
        {"id": "b", "gold": "4", "pred": "5", "label": False},
    ]
    suite.write_text("".join(json.dumps(line) + "\n" for line in lines))
    report = json.loads(_ok(["verifier-bench", "--grader", "demo_exact", "--suite", str(suite), "--json"]))
    assert report["fp_rate"] == 0.0 and report["fn_rate"] == 0.0
    # the loss, named by a train config
    config = tmp_path / "train.toml"
    config.write_text(
        f'out_dir = "{tmp_path / "run"}"\n[model]\ntiny = "tiny"\n[[envs]]\nname = "arithmetic"\n'
        "[sampling]\nmax_tokens = 2\n[rl]\nsteps = 1\ngroups_per_step = 1\ngroup_size = 2\n"
        'loss = {kind = "demo_reinforce", scale = 0.5}\n[eval]\ntasks = 1\n'
    )
    _ok(["train", str(config), "--threads", "1"])
    saved = json.loads((tmp_path / "run" / "train_config.json").read_text())
    assert saved["rl"]["loss"] == "demo_reinforce" and saved["rl"]["loss_options"] == {"scale": 0.5}


def test_a_fresh_process_finds_the_plugin_through_its_entry_point(site: Path) -> None:
    install(site, "[verigym.plugins]\ndemo = verigym_plugin_demo\n")
    code = (
        "from verigym.select import method_names; from verigym.policies.local.chat import TOOL_FORMATS; "
        "print('demo_longest' in method_names(), 'demo_xml' in TOOL_FORMATS)"
    )
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": path},
    )
    assert out.stdout.split() == ["True", "True"]


def test_the_old_env_group_still_works_with_a_deprecation(site: Path) -> None:
    install(site, "[verigym.envs]\nold_echo = verigym_plugin_demo.env:EchoEnv\n")
    with pytest.warns(DeprecationWarning, match="'verigym.envs', which is deprecated"):
        env = envs.load_env("old_echo")
    assert env.name == "demo_echo"


def test_a_broken_plugin_is_said_and_never_fatal(site: Path) -> None:
    install(site, "[verigym.plugins]\nbroken = no_such_plugin_module\n", name="broken_plugin")
    unknown = "unknown method 'nope'; expected one of best-of-n"
    with (
        pytest.warns(RuntimeWarning, match="verigym plugin broken = no_such_plugin_module"),
        pytest.raises(registry.UnknownNameError, match=unknown),
    ):
        get_method("nope")
    assert list(registry.plugin_errors()) == ["broken = no_such_plugin_module"]
    assert get_method("majority").name == "majority"
