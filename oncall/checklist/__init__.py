"""Root-cause checklists: runbooks, their expressions, and the engine that runs them."""
