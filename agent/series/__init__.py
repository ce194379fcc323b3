"""schedwatch's own series read back: the one reader of what an agent exports (collected in this process, a
/metrics text, or a Prometheus' query results), into totals per workload and per exported process, knowing each
sample from agent/metrics.py and the collectors' tables (schema). diagnose, top, verify, the standing evaluation and
the fleet view read through it."""
