"""verigym.select."""
