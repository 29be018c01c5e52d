"""``verigym._files.read_jsonl``: the one JSON Lines reader, with ``path:line`` errors of the caller's type."""

from __future__ import annotations

from pathlib import Path

import pytest

from verigym._files import FileProblem, read_jsonl


class MyError(ValueError):
    pass


def test_rows_with_where_and_blank_lines_skipped(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text('{"a": 1}\n\n  \n[2]\n')
    assert list(read_jsonl(path)) == [(f"{path}:1", {"a": 1}), (f"{path}:4", [2])]


@pytest.mark.parametrize(
    ("text", "objects", "message"),
    [
        ('{"a": 1}\n{"b"\n', False, r"a\.jsonl:2: invalid JSON \(Expecting ':' delimiter at column 5\)"),
        ('{"a": 1}\n[2]\n', True, r"a\.jsonl:2: expected a JSON object, got list"),
    ],
)
def test_a_bad_line_is_one_error_of_the_callers_type(
    tmp_path: Path, text: str, objects: bool, message: str
) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text(text)
    with pytest.raises(MyError, match=message):
        list(read_jsonl(path, error=MyError, objects=objects))


def test_file_problems_keep_their_words_in_the_callers_type(tmp_path: Path) -> None:
    with pytest.raises(MyError, match=r"nope\.jsonl: no such file"):
        list(read_jsonl(tmp_path / "nope.jsonl", error=MyError))
    (tmp_path / "b.jsonl").write_bytes(b'{"a": 1}\n{"b": "\xff"}\n')
    with pytest.raises(FileProblem, match=r"b\.jsonl:2: not UTF-8 text"):
        list(read_jsonl(tmp_path / "b.jsonl"))
