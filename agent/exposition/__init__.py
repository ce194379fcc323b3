"""The /metrics text: metric families kept as rows of label values, written out by hand with label strings cached.

prometheus_client builds a Sample (a namedtuple with a label dict) per series and formats every label pair again on
each scrape; at 1,000 workloads (34,000 series) that alone cost ~0.2 s of CPU per scrape. Here a family keeps
``(label values, value)`` rows, and the writer formats each label set once and reuses it while the series lives.
"""
