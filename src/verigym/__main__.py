"""``python -m verigym`` runs the command line (also what ``torchrun -m verigym`` starts)."""

from verigym.cli import main

main()
