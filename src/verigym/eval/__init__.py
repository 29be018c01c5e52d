"""verigym.eval."""
