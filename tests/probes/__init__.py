"""Tests of the read-only probes against real servers and the drill simulators."""
