"""Schema family: is structured output well-formed, valid under a JSON Schema, and right field by field?

``parse_structured`` reads JSON (bare, fenced or extracted from prose), YAML, TOML, CSV and XML.
``schema_grader`` scores 1 for a valid document; with ``partial=True`` (default) an invalid one
gets the fraction of required paths that are right, capped below 1; ``partial=False`` is
all-or-nothing. ``fields_grader`` scores the expected leaf values (numbers as numbers, strings
normalised unless ``normalise_strings=False``, extra keys ignored unless ``exact``).

Labeled suite: ``tests/suites/schema.jsonl`` (``verigym verifier-bench --grader schema``).

Inside: ``_parse`` (the format parsers), ``_validation`` (schema validation, field scores and their graders; re-exported here).
"""

from verigym.graders.schema import _validation
from verigym.graders.schema._validation import *  # noqa: F403 (the family's names, listed once in _validation.__all__)

__all__ = []
__all__ += _validation.__all__
