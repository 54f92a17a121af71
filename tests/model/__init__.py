"""Tests of the plain value types in oncall.model."""
