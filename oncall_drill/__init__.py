"""The drill environment: a simulated LLM service stack for demos, tests and game days.

It talks to the rest of oncall only over the network (HTTP, the Redis protocol) and imports
nothing else from the package; only the CLI imports it (docs/architecture.md §1,
checked by import-linter).
"""
