"""Facts from saved artifacts (``schedwatch analyze`` and ``compare``): each tool's output read into the views the
rules judge, one module per tool, merged into one environment per set of files."""

from agent.diagnosis.inputs.offline.load import OfflineError, read_environment

__all__ = ["OfflineError", "read_environment"]
