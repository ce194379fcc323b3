"""Processes of a flagged workload read from /proc: CPU, pool workers, thread-pool libraries, thread variables."""
