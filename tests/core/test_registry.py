"""``verigym.registry.Registry``: the one primitive behind environments, selection methods, losses,
grader families and tool formats (``tests/core/test_plugins.py`` drives it through a plugin package)."""

from __future__ import annotations

import json

import pytest

from verigym.registry import Registry, UnknownNameError, import_target


class UnknownColour(UnknownNameError):
    """An axis's own error type."""


def test_built_ins_are_found_once_lazily_and_listed_first_by_name() -> None:
    calls: list[int] = []

    def find() -> dict[str, object]:
        calls.append(1)
        return {"teal": "json:dumps", "amber": 2}

    colours: Registry[object] = Registry("colour", builtins=find, sort_builtins=True)
    colours.register("mine", 3)  # before the built-ins were looked for: not one of them
    assert calls == []
    assert colours.names() == ("amber", "teal", "mine") and calls == [1]
    assert colours.builtin_names == ("amber", "teal")
    assert colours.target("teal") == "json:dumps" and colours.get("teal") is json.dumps  # imported on use
    assert colours.target("teal") == "json:dumps" and colours.find("nope") is None
    colours.names()
    assert calls == [1]


def test_an_unknown_name_is_one_error_listing_the_known_ones() -> None:
    colours: Registry[int] = Registry("colour", builtins={"red": 1, "blue": 2}, error=UnknownColour)
    with pytest.raises(UnknownColour) as err:
        colours.get("green")
    assert str(err.value) == "unknown colour 'green'; expected one of red, blue"
    assert (err.value.kind, err.value.name, err.value.known) == ("colour", "green", ("red", "blue"))
    assert isinstance(err.value, KeyError) and isinstance(err.value, ValueError)
    assert colours.get("green", 0) == 0  # a mapping's get with a default


def test_register_replace_make_and_the_mapping_it_still_is() -> None:
    squares: Registry[int] = Registry("square", builtins={"two": 2}, make=lambda v: v * v)
    assert squares["two"] == 4
    squares.register("three", 3)
    with pytest.raises(ValueError, match="square 'three' is already registered"):
        squares.register("three", 9, replace=False)
    with pytest.raises(ValueError, match=r"'no\.colon' is not 'package\.module:attr'"):
        squares.register("x", "no.colon")
    with pytest.raises(ValueError, match="non-empty string"):
        squares.register("", 1)
    squares["four"] = 4
    assert "four" in squares and "five" not in squares and len(squares) == 3
    assert squares.pop("four") == 16 and squares.pop("four", None) is None
    assert list(squares) == ["two", "three"] and dict(squares.items()) == {"two": 4, "three": 9}
    with squares.scoped():
        squares.register("ten", 10)
        del squares["two"]
        assert squares.names() == ("three", "ten")
    assert squares.names() == ("two", "three")  # undone on leaving


def test_import_targets_are_module_colon_attribute() -> None:
    assert import_target("json:decoder.JSONDecoder") is json.decoder.JSONDecoder
    with pytest.raises(ValueError, match=r"is not 'package\.module:attr'"):
        import_target("json")
    with pytest.raises(ModuleNotFoundError):
        import_target("no_such_module_here:x")
    colours: Registry[object] = Registry("colour", builtins={"bad": "json:no_such_attr"})
    with pytest.raises(AttributeError):
        colours.get("bad")


def test_one_built_in_is_found_cheaply_without_finding_them_all() -> None:
    scans: list[int] = []

    def find_all() -> dict[str, object]:
        scans.append(1)
        return {"red": 1, "blue": 2}

    colours: Registry[object] = Registry("colour", builtins=find_all, quick={"red": 1}.get)
    assert colours.get("red") == 1 and scans == []  # the cheap way found it
    colours.register("red", 5)
    assert colours.get("red") == 5 and scans == []  # a registration comes first
    assert colours.get("blue") == 2 and scans == [1]  # not cheaply found: every built-in is looked for
