"""schedwatch: an eBPF agent that makes hidden CPU contention visible per process and container."""

__version__ = "0.1.0"
