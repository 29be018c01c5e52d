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
_INDEX_BLOCK = 1 << 20  # bytes indexed under the rows' lock at a time (queries wait at most that long)
_DECODE = json.JSONDecoder().decode

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
        self.lock = threading.RLock()  # the rows
        self.refresh_lock = threading.Lock()  # one reader of the file at a time
        self._reset()

    def _reset(self) -> None:
        self.done = 0  # bytes indexed (always just after a newline)
        self.size = 0  # the file's size when last seen
        self.inode: tuple[int, int] | None = None
        self.env = ""
        self.model = ""
        self.bad_lines = 0
        self.offset = array("q")
        self.length = array("i")
        self.task = array("i")
        self.sample = array("i")
        self.reward = array("d")  # NaN: errored (no reward)
        self.error = array("i")  # -1: none
        self.stop = array("i")
        self.prompt_tokens = array("i")
        self.completion_tokens = array("i")
        self.wall = array("f")
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

    @property
    def building(self) -> bool:
        """Whether a ``refresh`` is reading the file now (the rows so far can be queried meanwhile)."""
        return self.refresh_lock.locked()

    def refresh(self) -> bool:
        """Index the lines appended since the last call; True when rows were added. Rows are added a
        block (1 MiB) at a time under ``lock``, so queries on another thread see the rows so far."""
        with self.refresh_lock:
            try:
                st = os.stat(self.path)
            except FileNotFoundError:
                with self.lock:
                    if self.done:
                        self._reset()
                        return True
                return False
            ident = (st.st_dev, st.st_ino)
            with self.lock:
                if (self.inode is not None and ident != self.inode) or st.st_size < self.done:
                    self._reset()  # rewritten (a resume compacts the file) or replaced
                self.inode = ident
                self.size = st.st_size
            if st.st_size == self.done:
                return False
            before = len(self)
            with self.path.open("rb") as fh:
                fh.seek(self.done)
                carry = b""
                while chunk := fh.read(_INDEX_BLOCK):
                    data = carry + chunk
                    cut = data.rfind(b"\n") + 1
                    with self.lock:
                        n = len(self)
                        self._lines(data[:cut], self.done)
                        self.done += cut
                        self.size = max(self.size, self.done)
                        if len(self) != n:
                            self._task_rank = None
                            self._search = None
                            self.version += 1
                    carry = data[cut:]
            return len(self) != before

    def _lines(self, data: bytes, base: int) -> None:
        """Index the complete lines of ``data`` (which starts at byte ``base``): the hot loop. Lines in the
        writer's compact layout are cut into head fields and tails, and a run of tails is decoded as
        one JSON array; any other line is parsed whole where it stands (so file order is kept)."""
        head_match = _HEAD.match
        batch: list[tuple[int, int, str, int, str]] = []
        tails: list[str] = []
        pos = base
        for line in data.split(b"\n")[:-1]:
            size = len(line)
            if size:
                head = head_match(line)
                tail_at = line.rfind(_TAIL)
                stop_at = line.find(_STOP)
                end = line.find(b'"', stop_at + 15) if stop_at >= 0 else -1
                if head is None or tail_at < 0 or end < 0:
                    self._flush(batch, tails)
                    self._slow(line, pos)
                else:
                    raw_task = head[3]
                    task = _text(raw_task) if b"\\" in raw_task else raw_task.decode("utf-8", "replace")
                    stop = line[stop_at + 15 : end].decode("utf-8", "replace")
                    if not self.env:
                        self.env, self.model = _text(head[1]), _text(head[2])
                    batch.append((pos, size, task, int(head[4]), stop))
                    tails.append("{" + line[tail_at + 1 :].decode("utf-8", "replace"))
            pos += size + 1
        self._flush(batch, tails)

    def _flush(self, batch: list[tuple[int, int, str, int, str]], tails: list[str]) -> None:
        if not batch:
            return
        try:
            decoded = _DECODE("[" + ",".join(tails) + "]")
        except ValueError:  # one bad tail: decode them one by one
            decoded = []
            for tail in tails:
                try:
                    decoded.append(_DECODE(tail))
                except ValueError:
                    decoded.append(None)
        for (pos, size, task, sample, stop), tail in zip(batch, decoded, strict=True):
            try:
                if not isinstance(tail, dict):
                    raise ValueError("not a JSON object")
                self._append(pos, size, task, sample, stop, tail)
            except (ValueError, KeyError, TypeError, AttributeError):
                self.bad_lines += 1
        batch.clear()
        tails.clear()

    def _slow(self, line: bytes, offset: int) -> None:
        """A line not in the writer's compact layout: parsed whole."""
        try:
            record = json.loads(line)
            if not self.env:
                self.env, self.model = str(record["env"]), str(record["model"])
            stop = str(record["trajectory"].get("stop_reason", "done"))
            self._append(offset, len(line), str(record["task_id"]), int(record["sample_index"]), stop, record)
        except (ValueError, KeyError, TypeError, AttributeError):
            self.bad_lines += 1

    def _append(
        self, offset: int, size: int, task: str, sample: int, stop: str, tail: dict[str, Any]
    ) -> None:
        """One row: its values read from the record's tail (``score``, ``usage``, ``wall_s``, ``error``)."""
        score = tail["score"]
        usage = tail["usage"]
        error = tail.get("error")
        reward = score.get("reward")
        nan = math.nan
        values = {
            name: (nan if g.get("error") is not None or g.get("score") is None else float(g["score"]))
            for name, g in (score.get("grades") or {}).items()
        }
        n = len(self.offset)
        codes = self.tasks.codes
        code = codes.get(task)
        if code is None:
            code = self.tasks.code(task)
        key = code << 24 | (sample & 0xFFFFFF)
        keys = self._keys
        earlier = keys.get(key)
        if earlier is not None:
            self.live[earlier] = 0
        keys[key] = n
        stop_code = self.stops.codes.get(stop)
        self.offset.append(offset)
        self.length.append(size)
        self.task.append(code)
        self.sample.append(sample)
        self.reward.append(nan if reward is None or error is not None else float(reward))
        self.error.append(-1 if error is None else self.errors.code(str(error.get("kind", "error"))))
        self.stop.append(self.stops.code(stop) if stop_code is None else stop_code)
        self.prompt_tokens.append(int(usage.get("prompt_tokens", 0)))
        self.completion_tokens.append(int(usage.get("completion_tokens", 0)))
        self.wall.append(float(tail.get("wall_s", 0.0)))
        self.live.append(1)
        columns = self.grades
        if not values.keys() <= columns.keys():
            for name in values.keys() - columns.keys():
                columns[name] = array("d", [nan] * n)
        get = values.get
        for name, column in columns.items():
            column.append(get(name, nan))

    # ---- reading --------------------------------------------------------------------------------

    def column(self, name: str) -> np.ndarray:
        """A column as a numpy view (copy it before the index grows again)."""
        source: Any = self.grades[name[6:]] if name.startswith("grade:") else getattr(self, name)
        kinds = {"d": np.float64, "f": np.float32, "i": np.int32, "q": np.int64, "b": np.int8}
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
        """A boolean mask of the rows whose JSON line contains ``text`` (ASCII letters in any case), read in
        blocks: each block lower-cased, then found with ``bytes.find``, one hit a line."""
        n = len(self)
        if self._search is not None and self._search[:2] == (text, n):
            return self._search[2]
        needle = json.dumps(text, ensure_ascii=False)[1:-1].encode().lower()
        starts = self.column("offset")
        hits = np.zeros(n, dtype=bool)
        for block, base in self._blocks():
            low = block.lower()  # ASCII case folding in C; then memchr-speed finds
            positions = []
            at = low.find(needle)
            while at >= 0:
                positions.append(at + base)
                end = low.find(b"\n", at)  # one hit a line is enough: go on from the next line
                at = -1 if end < 0 else low.find(needle, end + 1)
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
