"""The commands of the ``verigym`` CLI, one module each (see ``verigym.cli``)."""
