"""verigym.policies."""
