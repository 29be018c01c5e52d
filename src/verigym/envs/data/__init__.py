"""Data shipped with the built-in environments (word lists, problem sets)."""
