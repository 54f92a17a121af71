"""Fixtures of the contexts tests: `note`, the test-only remediation (tests/remediation)."""

from tests.remediation.conftest import note

__all__ = ["note"]
