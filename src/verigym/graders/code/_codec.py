"""Plain-data codec and framing shared by the code grader and its sandboxed worker.

Stdlib only and self-contained: its source is also sent into the sandbox as part of the worker.
Values cross the sandbox boundary as tagged JSON and are rebuilt from plain built-in types only
(``int, float, bool, str, bytes, None, list, tuple, dict, set, frozenset, complex`` plus
``Fraction``/``Decimal``), so a candidate can never hand the grader an object with its own
``__eq__``/``__repr__``: whatever it returns is compared as data, in a process it never touched.
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

__all__ = ["CodecError", "decode", "dumps", "encode", "read_frame", "read_raw", "write_frame", "write_raw"]

_MAX_DEPTH = 200
_ENCODER: Any = None


class CodecError(ValueError):
    """A value could not be encoded or decoded (unsupported type, too deep, malformed)."""


def encode(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON-able tagged data; subclasses of built-ins are reduced to the built-in."""
    if depth > _MAX_DEPTH:
        raise CodecError("value nested too deeply")
    if value is None or value is True or value is False:
        return value
    if isinstance(value, bool):  # a bool subclass cannot exist, but stay exact
        return bool(value)
    if isinstance(value, int):
        return int.__index__(value)
    if isinstance(value, float):
        f = float.__float__(value)
        if f != f or f in (float("inf"), float("-inf")):
            return {"$t": "float", "v": repr(f)}
        return f
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bytes | bytearray):
        return {"$t": "bytes", "v": bytes(value).hex()}
    if isinstance(value, complex):
        c = complex(value)
        return {"$t": "complex", "v": [repr(c.real), repr(c.imag)]}
    fractions, decimal = sys.modules.get("fractions"), sys.modules.get("decimal")
    if fractions is not None and isinstance(value, fractions.Fraction):
        return {"$t": "fraction", "v": [int(value.numerator), int(value.denominator)]}
    if decimal is not None and isinstance(value, decimal.Decimal):
        return {"$t": "decimal", "v": str(value)}
    if isinstance(value, list):
        return [encode(x, depth + 1) for x in list.__iter__(value)]
    if isinstance(value, tuple):
        return {"$t": "tuple", "v": [encode(x, depth + 1) for x in tuple.__iter__(value)]}
    if isinstance(value, dict):
        return {
            "$t": "dict",
            "v": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in dict.items(value)],
        }
    if isinstance(value, set | frozenset):
        tag = "frozenset" if isinstance(value, frozenset) else "set"
        return {"$t": tag, "v": [encode(x, depth + 1) for x in value]}
    tolist = getattr(type(value), "tolist", None)  # numpy arrays and scalars
    if callable(tolist) and type(value).__module__ == "numpy":
        return encode(tolist(value), depth + 1)
    raise CodecError(f"cannot pass a {type(value).__name__} across the sandbox (plain data only)")


def decode(data: Any, depth: int = 0) -> Any:
    """Rebuild a value from ``encode``'s output using built-in types only."""
    if depth > _MAX_DEPTH:
        raise CodecError("value nested too deeply")
    if data is None or isinstance(data, bool | int | str):
        return data
    if isinstance(data, float):
        return data
    if isinstance(data, list):
        return [decode(x, depth + 1) for x in data]
    if not isinstance(data, dict) or set(data) != {"$t", "v"}:
        raise CodecError("malformed value")
    tag, v = data["$t"], data["v"]
    if tag == "tuple" and isinstance(v, list):
        return tuple(decode(x, depth + 1) for x in v)
    if tag == "dict" and isinstance(v, list):
        out = {}
        for pair in v:
            if not isinstance(pair, list) or len(pair) != 2:
                raise CodecError("malformed dict")
            out[_hashable(decode(pair[0], depth + 1))] = decode(pair[1], depth + 1)
        return out
    if tag in ("set", "frozenset") and isinstance(v, list):
        items = [_hashable(decode(x, depth + 1)) for x in v]
        return set(items) if tag == "set" else frozenset(items)
    if tag == "float" and v in ("nan", "inf", "-inf"):
        return float(v)
    if tag == "bytes" and isinstance(v, str):
        return bytes.fromhex(v)
    if tag == "complex" and isinstance(v, list) and len(v) == 2:
        return complex(float(v[0]), float(v[1]))
    if tag == "fraction" and isinstance(v, list) and len(v) == 2 and all(type(x) is int for x in v) and v[1]:
        from fractions import Fraction

        return Fraction(v[0], v[1])
    if tag == "decimal" and isinstance(v, str):
        from decimal import Decimal, InvalidOperation

        try:
            return Decimal(v)
        except InvalidOperation:
            raise CodecError("malformed decimal") from None
    raise CodecError(f"malformed value tagged {tag!r}")


def _hashable(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        raise CodecError("unhashable key") from None
    return value


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
