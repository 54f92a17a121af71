"""Tests of the remediation engine: guards, preview, execution."""
