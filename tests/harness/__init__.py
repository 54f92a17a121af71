"""Test harness: real redis-server and prometheus processes on free loopback ports, and fault
listeners (refusing, silent, misbehaving HTTP) for backend error tests."""
