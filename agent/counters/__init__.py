"""Where counts come from when BPF cannot run: counting perf events and /proc task schedstat."""


class SourceUnavailable(RuntimeError):
    """A source that needs no BPF (perf counters, /proc) cannot be opened here; the message says why."""
