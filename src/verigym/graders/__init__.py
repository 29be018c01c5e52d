"""verigym.graders."""
