"""Parsing of structured model output for ``schema.py``: JSON, YAML, TOML, CSV and XML.

XML becomes ``{root_tag: {child_tag: value, "@attr": value, "#text": text}}``; a tag repeated
under one parent becomes a list; documents with a DTD (``<!DOCTYPE``/``<!ENTITY``) are refused,
so entity expansion cannot be used against the grader.
"""

from __future__ import annotations

import csv
import io
import json
import re
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any, Literal

import yaml

__all__ = ["Format", "ParseError", "parse_structured"]

Format = Literal["json", "yaml", "toml", "csv", "xml"]


class ParseError(ValueError):
    """The text is not a document of the expected format."""


_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.S)


def _unfence(text: str, names: Sequence[str]) -> str:
    stripped = text.strip()
    whole = _FENCE.fullmatch(stripped)
    if whole and whole.group(1).lower() in {"", *names}:
        return whole.group(2)
    blocks = [m.group(2) for m in _FENCE.finditer(stripped) if m.group(1).lower() in {"", *names}]
    return blocks[0] if len(blocks) == 1 else stripped


def _json_documents(text: str) -> list[Any]:
    decoder = json.JSONDecoder()
    docs, i = [], 0
    while i < len(text):
        if text[i] in "{[":
            try:
                value, end = decoder.raw_decode(text, i)
            except ValueError:
                i += 1
                continue
            docs.append(value)
            i = end
        else:
            i += 1
    return docs


def _parse_json(text: str, extract: bool) -> Any:
    body = _unfence(text, ["json", "jsonc"]) if extract else text
    try:
        return json.loads(body)
    except ValueError as exc:
        if not extract:
            raise ParseError(f"not JSON: {exc}") from None
    docs = _json_documents(body)
    distinct = {json.dumps(d, sort_keys=True) for d in docs}
    if not docs:
        raise ParseError("no JSON document found")
    if len(distinct) > 1:
        raise ParseError(f"{len(distinct)} different JSON documents found (ambiguous)")
    return docs[0]


class _StrictBoolLoader(yaml.SafeLoader):
    """SafeLoader where only true/false are booleans (YAML 1.1 turns ``no``/``on`` into bools)."""


_StrictBoolLoader.yaml_implicit_resolvers = {
    key: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for key, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_StrictBoolLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def _coerce_cell(cell: str) -> Any:
    s = cell.strip()
    if re.fullmatch(r"[+-]?\d+", s):
        return int(s)
    if re.fullmatch(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?", s):
        return float(s)
    return cell


def _parse_csv(text: str, coerce: bool) -> list[dict[str, Any]]:
    reader = csv.DictReader(io.StringIO(text.strip()))
    if not reader.fieldnames:
        raise ParseError("CSV has no header row")
    rows: list[dict[str, Any]] = []
    for n, row in enumerate(reader, start=2):
        if None in row:
            raise ParseError(f"CSV line {n} has more fields than the header")
        if any(v is None for v in row.values()):
            raise ParseError(f"CSV line {n} has fewer fields than the header")
        rows.append({k: _coerce_cell(v) if coerce else v for k, v in row.items()})
    return rows


def _xml_value(el: ET.Element, coerce: bool) -> Any:
    text = (el.text or "").strip()
    attrs: dict[str, Any] = {f"@{k}": _coerce_cell(v) if coerce else v for k, v in el.attrib.items()}
    children = list(el)
    if not children and not attrs:
        return _coerce_cell(text) if coerce else text
    out: dict[str, Any] = dict(attrs)
    repeated: set[str] = set()
    for child in children:
        value = _xml_value(child, coerce)
        if child.tag not in out:
            out[child.tag] = value
        elif child.tag in repeated:
            out[child.tag].append(value)
        else:
            out[child.tag] = [out[child.tag], value]
            repeated.add(child.tag)
    if text:
        out["#text"] = text
    return out


def _parse_xml(text: str, coerce: bool) -> dict[str, Any]:
    if re.search(r"<!(DOCTYPE|ENTITY)", text, flags=re.IGNORECASE):
        raise ParseError("XML with a DTD is not accepted")
    root = ET.fromstring(text.strip())
    return {root.tag: _xml_value(root, coerce)}


def parse_structured(text: str, format: Format = "json", *, extract: bool = True, coerce: bool = True) -> Any:
    """The document in ``text``; ``ParseError`` with the reason when there is none."""
    if format == "json":
        return _parse_json(text, extract)
    body = _unfence(text, [format, "yml"] if format == "yaml" else [format]) if extract else text
    try:
        if format == "yaml":
            return yaml.load(body, Loader=_StrictBoolLoader)
        if format == "toml":
            return tomllib.loads(body)
        if format == "csv":
            return _parse_csv(body, coerce)
        if format == "xml":
            return _parse_xml(body, coerce)
    except (yaml.YAMLError, tomllib.TOMLDecodeError, csv.Error, ET.ParseError) as exc:
        raise ParseError(f"not {format.upper()}: {exc}") from None
    raise ValueError(f"unknown format {format!r}; expected json, yaml, toml, csv or xml")
