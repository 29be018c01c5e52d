"""Plain-data codec and framing shared by the code grader and its sandboxed worker.

Stdlib only and self-contained: its source is also sent into the sandbox as part of the worker.
What the sandbox says crosses as a *flat* JSON list of tokens in prefix order (a scalar, or a
small ``[tag, ...]`` marker followed by its children), built and parsed without recursion, so
depth is bounded only by ``MAX_DEPTH`` (100,000 levels) and size by the reply limit, never by
Python's recursion limit. Values are rebuilt from built-in and standard-library types only
(``int, float, bool, str, bytes, bytearray, None, list, tuple, dict, set, frozenset, complex,
range, Fraction, Decimal, deque, OrderedDict, Counter``, dict views, and one-shot iterators for a
returned generator/``map``/``zip``...), so a candidate can never hand the grader an object with its
own ``__eq__``/``__repr__``: whatever it returns is compared as data, in a process it never touched.
Subclasses of built-ins are reduced to the built-in (a namedtuple arrives as a tuple).

What the trusted grader sends (arguments) goes as ``marshal`` data when it can (fast, keeps
aliasing inside one call), else as tokens.
"""

from __future__ import annotations

import marshal
import os
import select
import struct
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # the worker imports nothing it does not need: startup time is grading throughput
    from typing import Any

__all__ = [
    "MAX_DEPTH",
    "MAX_ITEMS",
    "CodecError",
    "decode",
    "dumps",
    "encode",
    "read_frame",
    "read_raw",
    "write_frame",
    "write_raw",
]

MAX_DEPTH = 100_000  # nesting levels a value may have across the boundary
MAX_ITEMS = 20_000_000  # scalars + containers in one value (also stops cyclic values)
MAX_ITER_ITEMS = 1_000_000  # items taken from a returned iterator (an infinite one fails)
_BIG = 1 << 12000  # ints at least this large cross as hex (JSON/str conversion caps digits)
_ENCODER: Any = None

# marker tags
_LIST, _TUPLE, _DICT, _SET, _FSET, _FLOAT, _BYTES, _COMPLEX, _FRAC, _DEC = range(10)
_BIGINT, _BARRAY, _RANGE, _ITER, _DEQUE, _ODICT, _COUNTER, _KEYS, _VALUES, _ITEMS = range(10, 20)
_CONTAINERS = {
    _LIST: 1, _TUPLE: 1, _DICT: 2, _SET: 1, _FSET: 1, _ITER: 1,
    _DEQUE: 1, _ODICT: 2, _COUNTER: 2, _KEYS: 1, _VALUES: 1, _ITEMS: 2,
}  # fmt: skip
_SCALARS = frozenset((int, str, bool, type(None)))
_NAMED = {
    ("collections", "deque"): _DEQUE,
    ("collections", "OrderedDict"): _ODICT,
    ("collections", "Counter"): _COUNTER,
    ("builtins", "dict_keys"): _KEYS,
    ("builtins", "dict_values"): _VALUES,
    ("builtins", "dict_items"): _ITEMS,
}


class CodecError(ValueError):
    """A value could not be encoded or decoded (unsupported type, too big, too deep, malformed)."""


def _int(v: Any) -> Any:
    v = int.__index__(v)
    return v if -_BIG < v < _BIG else [_BIGINT, hex(v)]


def _float(v: Any) -> Any:
    f = float.__float__(v)
    return f if f - f == 0.0 else [_FLOAT, repr(f)]


def _fast(v: Any, out: list[Any]) -> bool:
    """A list/tuple of one scalar type, emitted in one go (the common large result)."""
    kinds = set(map(type, v))
    if len(kinds) != 1:
        return not v
    kind = kinds.pop()
    if kind is int:
        if not (min(v) > -_BIG and max(v) < _BIG):
            return False
    elif kind is float:
        import math

        if not all(map(math.isfinite, v)):
            return False
    elif kind is not str and kind is not bool:
        return False
    out.extend(v)
    return True


def encode(value: Any, max_items: int = MAX_ITEMS) -> list[Any]:
    """``value`` as a flat token list (JSON-able); raises ``CodecError`` for anything else."""
    out: list[Any] = []
    emit = out.append
    stack = [value]
    push = stack.append
    while stack:
        v = stack.pop()
        t = type(v)
        if t is int:
            emit(v if -_BIG < v < _BIG else [_BIGINT, hex(v)])
        elif t is str or t is bool or v is None:
            emit(v)
        elif t is float:
            emit(v if v - v == 0.0 else [_FLOAT, repr(v)])
        elif t is list or t is tuple:
            emit([_LIST if t is list else _TUPLE, len(v)])
            if not _fast(v, out):
                stack.extend(reversed(v))
        elif t is dict:
            items = list(v.items())
            emit([_DICT, len(items)])
            for k, x in reversed(items):
                push(x)
                push(k)
        else:
            _other(v, emit, push)
        if len(out) > max_items:
            raise CodecError(f"value of more than {max_items} items (or a cyclic value)")
    return out


def _other(v: Any, emit: Any, push: Any) -> None:
    """Encode what is not an exact list/tuple/dict/scalar: subclasses, other types, iterators."""
    t = type(v)
    tag = _NAMED.get((getattr(t, "__module__", ""), getattr(t, "__qualname__", "")))
    if tag in (_DEQUE, _KEYS, _VALUES):
        children = list(v)
    elif tag in (_ODICT, _COUNTER, _ITEMS):
        children = [x for pair in (v if tag == _ITEMS else dict.items(v)) for x in pair]
    elif isinstance(v, bool):
        emit(bool(v))
        return
    elif isinstance(v, int):
        emit(_int(v))
        return
    elif isinstance(v, float):
        emit(_float(v))
        return
    elif isinstance(v, str):
        emit(str.__str__(v))
        return
    elif isinstance(v, bytes | bytearray):
        emit([_BARRAY if t is bytearray else _BYTES, bytes(v).hex()])
        return
    elif isinstance(v, complex):
        c = complex(v)
        emit([_COMPLEX, repr(c.real), repr(c.imag)])
        return
    elif t is range:
        emit([_RANGE, hex(v.start), hex(v.stop), hex(v.step)])
        return
    elif isinstance(v, list):
        tag, children = _LIST, list(list.__iter__(v))
    elif isinstance(v, tuple):
        tag, children = _TUPLE, list(tuple.__iter__(v))
    elif isinstance(v, dict):
        tag, children = _DICT, [x for pair in dict.items(v) for x in pair]
    elif isinstance(v, frozenset):
        tag, children = _FSET, list(frozenset.__iter__(v))
    elif isinstance(v, set):
        tag, children = _SET, list(set.__iter__(v))
    else:
        fractions, decimal = sys.modules.get("fractions"), sys.modules.get("decimal")
        if fractions is not None and isinstance(v, fractions.Fraction):
            emit([_FRAC, hex(int(v.numerator)), hex(int(v.denominator))])
            return
        if decimal is not None and isinstance(v, decimal.Decimal):
            emit([_DEC, str(v)])
            return
        tolist = getattr(t, "tolist", None)  # numpy arrays and scalars
        if callable(tolist) and str(getattr(t, "__module__", "")).startswith("numpy"):
            push(tolist(v))
            return
        if hasattr(t, "__next__") and hasattr(t, "__iter__"):  # generator, map, zip, iterator...
            tag, children = _ITER, []
            for x in v:
                children.append(x)
                if len(children) > MAX_ITER_ITEMS:
                    raise CodecError(f"a returned iterator gave more than {MAX_ITER_ITEMS} items")
        else:
            raise CodecError(f"cannot pass a {t.__name__} across the sandbox (plain data only)")
    n = len(children) // _CONTAINERS[tag]
    emit([tag, n])
    push_all = children[::-1]
    for x in push_all:
        push(x)


def _build(tag: int, items: list[Any]) -> Any:
    try:
        if tag == _LIST:
            return items
        if tag == _TUPLE:
            return tuple(items)
        if tag in (_DICT, _ODICT, _COUNTER, _ITEMS):
            pairs = zip(items[0::2], items[1::2], strict=True)
            if tag == _DICT:
                return dict(pairs)
            if tag == _ITEMS:
                return dict(pairs).items()
            import collections

            return collections.OrderedDict(pairs) if tag == _ODICT else collections.Counter(dict(pairs))
        if tag == _SET:
            return set(items)
        if tag == _FSET:
            return frozenset(items)
        if tag == _ITER:
            return iter(items)
        if tag == _DEQUE:
            import collections

            return collections.deque(items)
        if tag == _KEYS:
            keys = dict.fromkeys(items)
            if len(keys) != len(items):
                raise CodecError("malformed dict_keys")
            return keys.keys()
        if tag == _VALUES:
            return dict(enumerate(items)).values()
    except TypeError:
        raise CodecError("unhashable key") from None
    raise CodecError(f"malformed container tag {tag!r}")


def _atom(tok: list[Any]) -> Any:
    """A scalar marker (``[tag, text...]``) as its value."""
    tag, args = tok[0], tok[1:]
    if not all(type(a) is str for a in args):
        raise CodecError("malformed value")
    try:
        if tag == _FLOAT and args[0] in ("nan", "inf", "-inf"):
            return float(args[0])
        if tag == _BIGINT:
            return int(args[0], 16)
        if tag in (_BYTES, _BARRAY):
            raw = bytes.fromhex(args[0])
            return raw if tag == _BYTES else bytearray(raw)
        if tag == _COMPLEX and len(args) == 2:
            return complex(float(args[0]), float(args[1]))
        if tag == _RANGE and len(args) == 3:
            return range(int(args[0], 16), int(args[1], 16), int(args[2], 16))
        if tag == _FRAC and len(args) == 2:
            from fractions import Fraction

            return Fraction(int(args[0], 16), int(args[1], 16))
        if tag == _DEC and len(args) == 1:
            from decimal import Decimal

            return Decimal(args[0])
    except (ValueError, ArithmeticError, IndexError, ZeroDivisionError):
        raise CodecError("malformed value") from None
    raise CodecError(f"malformed value tagged {tag!r}")


def decode(tokens: Any, max_depth: int = MAX_DEPTH) -> Any:
    """Rebuild the value of ``encode``'s token list, without recursion; ``CodecError`` if malformed."""
    if type(tokens) is not list or not tokens:
        raise CodecError("malformed value")
    root: list[Any] = [None, 1, []]
    stack = [root]
    i, n = 0, len(tokens)
    while i < n:
        if len(stack) == 1 and root[2]:
            raise CodecError("malformed value (trailing data)")
        tok = tokens[i]
        i += 1
        if type(tok) is list:
            if not tok or type(tok[0]) is not int or type(tok[0]) is bool:
                raise CodecError("malformed value")
            tag = tok[0]
            width = _CONTAINERS.get(tag)
            if width is None:
                value = _atom(tok)
            else:
                if len(tok) != 2 or type(tok[1]) is not int or tok[1] < 0:
                    raise CodecError("malformed container")
                need = tok[1] * width
                chunk = tokens[i : i + need]
                if need and len(chunk) == need and set(map(type, chunk)) <= _SCALARS | {float}:
                    i += need  # a container of scalars only: take them in one go
                    value = _build(tag, list(chunk))
                elif need:
                    if len(stack) > max_depth:
                        raise CodecError(f"value nested more than {max_depth} levels deep")
                    stack.append([tag, need, []])
                    continue
                else:
                    value = _build(tag, [])
        elif type(tok) in _SCALARS or type(tok) is float:
            value = tok
        else:
            raise CodecError("malformed value")
        while True:
            frame = stack[-1]
            frame[2].append(value)
            if len(frame[2]) < frame[1] or frame is root:
                break
            stack.pop()
            value = _build(frame[0], frame[2])
    if len(stack) != 1 or len(root[2]) != 1:
        raise CodecError("malformed value (truncated)")
    return root[2][0]


def _not_json(obj: Any) -> Any:
    raise TypeError(f"{type(obj).__name__} is not JSON data")


def dumps(obj: Any) -> bytes:
    """JSON text of plain data through the C encoder, without importing ``json`` (and ``re``)."""
    global _ENCODER
    if _ENCODER is None:
        try:
            import _json

            enc = _json.make_encoder(
                None, _not_json, _json.encode_basestring_ascii, None, ":", ",", False, False, False
            )
            enc({"probe": [1, 2.5, "x", None, True]}, 0)
            _ENCODER = lambda o: "".join(enc(o, 0))  # noqa: E731
        except (ImportError, TypeError, AttributeError):
            import json

            _ENCODER = lambda o: json.dumps(o, separators=(",", ":"), allow_nan=False)  # noqa: E731
    return str(_ENCODER(obj)).encode()


def write_raw(fd: int, body: bytes, deadline: float | None = None) -> None:
    """Send one length-prefixed frame whose body is already serialised; with a ``deadline`` the
    descriptor must be non-blocking and ``TimeoutError`` is raised when the reader stalls."""
    view = memoryview(struct.pack(">I", len(body)) + body)
    while view:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([], [fd], [], left)[1]:
                raise TimeoutError
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                continue
        else:
            view = view[os.write(fd, view) :]


def write_frame(fd: int, obj: Any, *, fmt: str = "json", deadline: float | None = None) -> None:
    """Send one frame: JSON (what the sandbox says) or marshal (what the trusted grader says)."""
    write_raw(fd, marshal.dumps(obj) if fmt == "marshal" else dumps(obj), deadline)


def _read_exact(fd: int, n: int, deadline: float | None) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(n - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def read_raw(fd: int, *, deadline: float | None = None, max_bytes: int = 1 << 26) -> bytes | None:
    """Read one frame's body; ``None`` at end of stream (the other side died or closed).

    Raises ``TimeoutError`` past ``deadline`` (a ``time.monotonic()`` value) and ``CodecError``
    when the announced size is over ``max_bytes``."""
    head = _read_exact(fd, 4, deadline)
    if head is None:
        return None
    (size,) = struct.unpack(">I", head)
    if size > max_bytes:
        raise CodecError(f"reply of {size} bytes is over the {max_bytes}-byte limit")
    return _read_exact(fd, size, deadline)


def read_frame(fd: int, *, deadline: float | None = None, max_bytes: int = 1 << 26, fmt: str = "json") -> Any:
    """Read and parse one frame (see ``read_raw``); ``fmt="marshal"`` only for frames from the
    trusted grader. Raises ``CodecError`` when the body does not parse."""
    body = read_raw(fd, deadline=deadline, max_bytes=max_bytes)
    if body is None:
        return None
    if fmt == "marshal":
        return marshal.loads(body)
    import json

    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise CodecError(f"reply is not valid JSON: {str(exc)[:100]}") from None
