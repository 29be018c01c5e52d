"""Apply a unified diff (``git diff`` / ``diff -u`` output) to an in-memory tree of files.

Pure Python, so the grader sees exactly which files a patch adds, changes and deletes (the
anti-hacking detectors need that) without running ``git`` on untrusted input. Hunks must match
their context exactly; a hunk whose position drifted is searched for nearby (like ``patch``'s
offset, without fuzz). New files (``--- /dev/null``), deletions (``+++ /dev/null``), git renames
and ``\\ No newline at end of file`` are handled.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["PatchError", "apply_patch", "changed_paths"]

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchError(ValueError):
    """The patch is malformed or does not apply (the candidate's fault: a fail, not an error)."""


@dataclass
class _FilePatch:
    old: str | None
    new: str | None
    hunks: list[tuple[int, list[str]]] = field(default_factory=list)


def _strip(path: str) -> str | None:
    path = path.split("\t")[0].strip()
    if path == "/dev/null":
        return None
    if path.startswith(('"a/', '"b/')):
        path = path.strip('"')
    return path[2:] if path.startswith(("a/", "b/")) else path


def _parse(patch: str) -> list[_FilePatch]:
    lines = patch.splitlines(keepends=True)
    out: list[_FilePatch] = []
    cur: _FilePatch | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            cur = None
        elif line.startswith("rename from "):
            cur = _FilePatch(old=line[12:].strip(), new=None)
            out.append(cur)
        elif line.startswith("rename to ") and cur is not None:
            cur.new = line[10:].strip()
        elif line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old, new = _strip(line[4:]), _strip(lines[i + 1][4:])
            if cur is not None and cur.hunks == [] and cur.old == old and cur.new is not None:
                pass  # the ---/+++ of a rename with changes
            else:
                cur = _FilePatch(old=old, new=new)
                out.append(cur)
            i += 1
        elif line.startswith("@@"):
            m = _HUNK.match(line)
            if cur is None or m is None:
                raise PatchError(f"malformed hunk header: {line.strip()[:80]!r}")
            body: list[str] = []
            i += 1
            old_left = int(m.group(2) or 1)
            new_left = int(m.group(4) or 1)
            while i < len(lines) and (old_left > 0 or new_left > 0):
                h = lines[i]
                if h.startswith("\\"):
                    if body:
                        body[-1] = body[-1].rstrip("\n")
                    i += 1
                    continue
                tag = h[:1] if h not in ("\n", "\r\n") else " "
                if tag not in (" ", "-", "+"):
                    break
                body.append(tag + (h[1:] if h not in ("\n", "\r\n") else "\n"))
                old_left -= tag in " -"
                new_left -= tag in " +"
                i += 1
            while i < len(lines) and lines[i].startswith("\\"):
                if body:
                    body[-1] = body[-1].rstrip("\n")
                i += 1
            if old_left > 0 or new_left > 0:
                raise PatchError("a hunk is shorter than its header says")
            cur.hunks.append((int(m.group(1)), body))
            continue
        i += 1
    if not out:
        raise PatchError("no file changes found in the patch")
    return out


def _apply_hunks(text: str, fp: _FilePatch) -> str:
    lines = text.splitlines(keepends=True)
    offset = 0
    for start, body in fp.hunks:
        old = [b[1:] for b in body if b[0] in " -"]
        new = [b[1:] for b in body if b[0] in " +"]
        want = max(0, start - 1 + offset) if old else start + offset
        pos = next(
            (
                p
                for d in range(0, len(lines) + 1)
                for p in (want - d, want + d)
                if 0 <= p <= len(lines) - len(old) and lines[p : p + len(old)] == old
            ),
            None,
        )
        if pos is None:
            raise PatchError(f"hunk at line {start} of {fp.old or fp.new} does not apply")
        lines[pos : pos + len(old)] = new
        offset += (pos - want) + len(new) - len(old)
    return "".join(lines)


def apply_patch(files: Mapping[str, str], patch: str) -> dict[str, str]:
    """The tree after ``patch``; raises ``PatchError`` when it is malformed or does not apply."""
    out = dict(files)
    for fp in _parse(patch):
        if fp.old is not None and fp.old not in out:
            raise PatchError(f"the patch changes {fp.old}, which does not exist")
        base = out.pop(fp.old) if fp.old is not None else ""
        if fp.new is None:
            continue  # deleted
        if fp.old is None and fp.new in out:
            raise PatchError(f"the patch creates {fp.new}, which already exists")
        out[fp.new] = _apply_hunks(base, fp) if fp.hunks else base
    return out


def changed_paths(
    before: Mapping[str, str], after: Mapping[str, str]
) -> tuple[list[str], list[str], list[str]]:
    """(added, modified, deleted) paths between two trees."""
    added = sorted(set(after) - set(before))
    deleted = sorted(set(before) - set(after))
    modified = sorted(p for p in set(before) & set(after) if before[p] != after[p])
    return added, modified, deleted
