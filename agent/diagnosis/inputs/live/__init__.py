"""Live facts for `schedwatch diagnose`: schedwatch's own series read twice (from collectors loaded in this
process, a running agent's /metrics, or a Prometheus server), the node's CPU states, and, for the workloads whose
counts show contention, their processes read from /proc."""
