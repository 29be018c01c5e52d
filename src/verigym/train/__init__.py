"""verigym.train."""
