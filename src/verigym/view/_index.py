"""A byte-offset index of one ``results.jsonl``: built once, extended as the file grows, never holding records.

Each complete line becomes one row of a few numeric columns (its byte offset and length, task, sample
index, reward, each grader's score, error kind, stop reason, tokens, wall time); a page of the sample
table is cut from these columns and a sample is read back by its byte range. A line is read on a fast
path that parses only the record's small tail (``score``, ``usage``, ``wall_s``, ``error``) and its head
(``env`` … ``sample_index``), falling back to a full parse for a line not in the writer's compact layout.
``refresh()`` reads only the bytes appended since the last call, up to the last newline (a line being
written is left for later); a file that shrank or was replaced is indexed again from the start. A later
line of the same ``(task_id, sample_index)`` supersedes the earlier one (a resumed run), as in
``eval.store.latest``. Free-text search scans the file in blocks for the JSON-escaped text.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["ResultsIndex", "Row"]

_HEAD = re.compile(
    rb'\{"env":"((?:[^"\\]|\\.)*)","model":"((?:[^"\\]|\\.)*)","task_id":"((?:[^"\\]|\\.)*)",'
    rb'"sample_index":(\d+),'
)
_TAIL = b',"score":{"grades":'
_STOP = b'"stop_reason":"'
_BLOCK = 8 << 20  # bytes read at a time (indexing, free-text search)

Row = dict[str, Any]


def _text(raw: bytes) -> str:
    return json.loads(b'"' + raw + b'"') if b"\\" in raw else raw.decode("utf-8", "replace")


class _Codes:
    """Strings as small integers (task ids, error kinds, stop reasons)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.codes: dict[str, int] = {}

    def code(self, name: str) -> int:
        found = self.codes.get(name)
        if found is None:
            found = self.codes[name] = len(self.names)
            self.names.append(name)
        return found


class ResultsIndex:
    """The index of one results file (thread-safe: the server answers requests on worker threads)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.lock = threading.RLock()
        self._reset()

    def _reset(self) -> None:
        self.done = 0  # bytes indexed (always just after a newline)
        self.inode: tuple[int, int] | None = None
        self.env = ""
        self.model = ""
        self.bad_lines = 0
        self.offset = array("q")
        self.length = array("l")
        self.task = array("l")
        self.sample = array("l")
        self.reward = array("d")  # NaN: errored (no reward)
        self.error = array("l")  # -1: none
        self.stop = array("l")
        self.prompt_tokens = array("l")
        self.completion_tokens = array("l")
        self.wall = array("d")
        self.live = array("b")  # 0: superseded by a later line of the same key
        self.grades: dict[str, array[float]] = {}
        self.tasks = _Codes()
        self.errors = _Codes()
        self.stops = _Codes()
        self._keys: dict[int, int] = {}
        self._task_rank: np.ndarray | None = None
        self._search: tuple[str, int, np.ndarray] | None = None
        self.version = 0  # bumps whenever rows change

    def __len__(self) -> int:
        return len(self.offset)

    # ---- building -------------------------------------------------------------------------------

    def refresh(self) -> bool:
        """Index the lines appended since the last call; True when rows were added."""
        with self.lock:
            try:
                st = os.stat(self.path)
            except FileNotFoundError:
                if self.done:
                    self._reset()
                    return True
                return False
            ident = (st.st_dev, st.st_ino)
            if (self.inode is not None and ident != self.inode) or st.st_size < self.done:
                self._reset()  # rewritten (a resume compacts the file) or replaced
            self.inode = ident
            if st.st_size == self.done:
                return False
            before = len(self)
            with self.path.open("rb") as fh:
                fh.seek(self.done)
                pos = self.done
                carry = b""
                while chunk := fh.read(_BLOCK):
                    data = carry + chunk
                    cut = data.rfind(b"\n") + 1
                    self._lines(data[:cut], pos)
                    pos += cut
                    carry = data[cut:]
                self.done = pos
            if len(self) != before:
                self._task_rank = None
                self._search = None
                self.version += 1
            return len(self) != before

    def _lines(self, data: bytes, base: int) -> None:
        start = 0
        end = len(data)
        while start < end:
            stop = data.index(b"\n", start)
            if stop > start:
                self._add(data[start:stop], base + start)
            start = stop + 1

    def _add(self, line: bytes, offset: int) -> None:
        head = _HEAD.match(line)
        tail_at = line.rfind(_TAIL)
        stop_at = line.find(_STOP)
        try:
            if head is not None and tail_at > 0 and stop_at > 0:
                tail = json.loads(b"{" + line[tail_at + 1 :])
                env, model, task = _text(head[1]), _text(head[2]), _text(head[3])
                sample = int(head[4])
                s = stop_at + len(_STOP)
                stop = line[s : line.index(b'"', s)].decode()
            else:
                tail = json.loads(line)
                env, model, task = str(tail["env"]), str(tail["model"]), str(tail["task_id"])
                sample = int(tail["sample_index"])
                stop = str(tail["trajectory"].get("stop_reason", "done"))
            score, usage, error = tail["score"], tail["usage"], tail.get("error")
            reward = score.get("reward")
            values = {
                name: (math.nan if g.get("error") or g.get("score") is None else float(g["score"]))
                for name, g in (score.get("grades") or {}).items()
            }
            row_error = -1 if error is None else self.errors.code(str(error.get("kind", "error")))
            wall = float(tail.get("wall_s", 0.0))
            ptok, ctok = int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
        except (ValueError, KeyError, TypeError, AttributeError):
            self.bad_lines += 1
            return
        if not self.env:
            self.env, self.model = env, model
        n = len(self)
        code = self.tasks.code(task)
        key = code << 24 | (sample & 0xFFFFFF)
        earlier = self._keys.get(key)
        if earlier is not None:
            self.live[earlier] = 0
        self._keys[key] = n
        self.offset.append(offset)
        self.length.append(len(line))
        self.task.append(code)
        self.sample.append(sample)
        self.reward.append(math.nan if reward is None or error is not None else float(reward))
        self.error.append(row_error)
        self.stop.append(self.stops.code(stop))
        self.prompt_tokens.append(ptok)
        self.completion_tokens.append(ctok)
        self.wall.append(wall)
        self.live.append(1)
        for name in values.keys() - self.grades.keys():
            self.grades[name] = array("d", [math.nan] * n)
        for name, column in self.grades.items():
            column.append(values.get(name, math.nan))

    # ---- reading --------------------------------------------------------------------------------

    def column(self, name: str) -> np.ndarray:
        """A column as a numpy view (copy it before the index grows again)."""
        source: Any = self.grades[name[6:]] if name.startswith("grade:") else getattr(self, name)
        kinds = {"d": np.float64, "l": np.int64, "q": np.int64, "b": np.int8}
        return np.frombuffer(source, dtype=kinds[source.typecode]) if len(source) else np.zeros(0)

    def task_rank(self) -> np.ndarray:
        """Each task code's place in the sorted task ids (to sort rows by task)."""
        if self._task_rank is None or len(self._task_rank) != len(self.tasks.names):
            order = sorted(range(len(self.tasks.names)), key=self.tasks.names.__getitem__)
            rank = np.empty(len(order), dtype=np.int64)
            rank[order] = np.arange(len(order))
            self._task_rank = rank
        return self._task_rank

    def line(self, row: int) -> bytes:
        """The raw JSON line of ``row``, read by its byte range."""
        with self.path.open("rb") as fh:
            fh.seek(self.offset[row])
            return fh.read(self.length[row])

    def row(self, row: int) -> Row:
        """``row``'s indexed values (what the sample table shows)."""
        err = self.error[row]
        out: Row = {
            "row": row,
            "task_id": self.tasks.names[self.task[row]],
            "sample_index": self.sample[row],
            "reward": None if math.isnan(self.reward[row]) else self.reward[row],
            "error": None if err < 0 else self.errors.names[err],
            "stop_reason": self.stops.names[self.stop[row]],
            "prompt_tokens": self.prompt_tokens[row],
            "completion_tokens": self.completion_tokens[row],
            "wall_s": self.wall[row],
            "grades": {n: None if math.isnan(c[row]) else c[row] for n, c in sorted(self.grades.items())},
            "superseded": not self.live[row],
        }
        return out

    def find(self, task_id: str, sample_index: int) -> int | None:
        code = self.tasks.codes.get(task_id)
        return None if code is None else self._keys.get(code << 24 | (sample_index & 0xFFFFFF))

    def search(self, text: str) -> np.ndarray:
        """A boolean mask of the rows whose JSON line contains ``text`` (case-insensitive), read in blocks."""
        n = len(self)
        if self._search is not None and self._search[:2] == (text, n):
            return self._search[2]
        needle = json.dumps(text, ensure_ascii=False)[1:-1].encode()
        pattern = re.compile(re.escape(needle), re.IGNORECASE)
        starts = self.column("offset")
        hits = np.zeros(n, dtype=bool)
        for block, base in self._blocks():
            positions = [m.start() + base for m in pattern.finditer(block)]
            if positions:
                rows = np.searchsorted(starts, np.asarray(positions, dtype=np.int64), side="right") - 1
                hits[rows[rows >= 0]] = True
        self._search = (text, n, hits)
        return hits

    def _blocks(self) -> Iterator[tuple[bytes, int]]:
        with self.path.open("rb") as fh:
            pos = 0
            carry = b""
            while pos + len(carry) < self.done and (
                chunk := fh.read(min(_BLOCK, self.done - pos - len(carry)))
            ):
                data = carry + chunk
                cut = data.rfind(b"\n") + 1 or len(data)
                yield data[:cut], pos
                pos += cut
                carry = data[cut:]
