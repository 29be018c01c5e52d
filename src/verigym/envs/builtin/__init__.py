"""The built-in environments, one public module each, with their private helpers and data files.

Nothing here is imported by ``import verigym.envs``: the registry (``verigym.envs.registry``) finds
each built-in by reading its module's source (a public class with ``name = "..."`` and
``description = "..."``) and imports the module only when the environment is loaded. The framework
they are written with (``base``, ``tool``, ``procedural``, ``dataset_env``, ``user_sim``, the
registry, ``check``, ``prepare``, ``remote``) stays in ``verigym.envs``.
"""

__all__: list[str] = []
