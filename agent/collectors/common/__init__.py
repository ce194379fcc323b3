"""What the BPF collectors share, one job a module: the base collector over a probe (bpf_collector), per-workload
totals (totals), the top-K processes (top), whether a BPF collector can run (availability), map sizes (limits),
histogram buckets (histograms) and the collectors' own metrics (self_metrics).
"""
