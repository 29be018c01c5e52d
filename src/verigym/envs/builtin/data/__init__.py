"""Data shipped with the built-in environments (word lists, problem sets); no names of its own."""

__all__: list[str] = []  # a data package: the environments read its modules and files
