"""Schema family: is structured output well-formed, valid under a JSON Schema, and right field by field?

``parse_structured`` reads JSON (bare, fenced or extracted from prose), YAML, TOML, CSV and XML.
``schema_grader`` scores 1 for a valid document; with ``partial=True`` (default) an invalid one
gets the fraction of required paths that are right, capped below 1; ``partial=False`` is
all-or-nothing. ``fields_grader`` scores the expected leaf values (numbers as numbers, strings
normalised unless ``normalise_strings=False``, extra keys ignored unless ``exact``).

Labeled suite: ``tests/suites/schema.jsonl`` (``verigym verifier-bench --grader schema``).

Inside: ``_parse`` (the format parsers), ``_grader`` (re-exported here).
"""

from verigym.graders.schema._grader import (
    Format,
    ParseError,
    bench_verdict,
    fields_grader,
    fields_score,
    parse_structured,
    required_paths,
    schema_grader,
    schema_score,
)

__all__ = [
    "Format",
    "ParseError",
    "bench_verdict",
    "fields_grader",
    "fields_score",
    "parse_structured",
    "required_paths",
    "schema_grader",
    "schema_score",
]
