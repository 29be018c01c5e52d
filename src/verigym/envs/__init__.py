"""verigym.envs."""
