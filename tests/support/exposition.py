"""Fixed metric families, written by the agent's writer and by prometheus_client's (the reference)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric

from agent.exposition.text import TextWriter


class Served:
    """A registry collector handing out fixed families."""

    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


def registry_of(families: list[Metric]) -> CollectorRegistry:
    """A registry serving *families* alone."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Served(families))  # type: ignore[arg-type]
    return registry


def by_agent(families: list[Metric]) -> str:
    """The text the agent serves for *families* (agent.exposition)."""
    return TextWriter().write(families).decode("utf-8")


def by_prometheus_client(families: list[Metric]) -> str:
    """The text prometheus_client writes for *families*: the reference."""
    return generate_latest(registry_of(families)).decode("utf-8")
