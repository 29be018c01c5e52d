"""verigym.data."""
