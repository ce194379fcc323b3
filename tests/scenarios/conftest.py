"""Scenario tier: real workloads, the real `schedwatch diagnose` and `verify`. Needs root; fails loudly without it."""
