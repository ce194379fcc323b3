"""Scenario workloads written in Python (the C ones are in tests/workloads, built by tests.support.workloads)."""
