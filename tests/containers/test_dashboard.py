"""Every panel of the Grafana dashboard, with its variables filled in, returns data from a live Prometheus
scraping a live agent that watches a real container."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.agent import AgentProcess, kubelet_docker_agent
from tests.support.containers import Podman
from tests.support.prometheus import Prometheus

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "schedwatch.json"
LABELS = {
    "io.kubernetes.pod.name": "checkout",
    "io.kubernetes.pod.namespace": "shop",
    "io.kubernetes.container.name": "api",
}


@pytest.fixture(scope="module")
def kubelet_agent(podman: Podman, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    """An agent told that Podman's Docker API is the kubelet's runtime (as cri-dockerd would be), so that the
    container's io.kubernetes.* labels are trusted as pod and namespace (docs/identity.md). It times every
    workload's system calls by family (syscall_families, off by default: the panels of system calls by family show
    what an agent with it on exports): on a shared machine the container need not be among the busiest, which are
    timed by default, and the panel of time inside system calls must have its data."""
    agent = kubelet_docker_agent(
        tmp_path_factory.mktemp("kubelet-agent"),
        podman.socket,
        "--collector.syscall_families",
        "--syscall-time",
        "all",
    )
    agent.wait_ready()
    yield agent
    assert agent.stop() == 0, agent.log()


@pytest.fixture(scope="module")
def prometheus(kubelet_agent: AgentProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    server = Prometheus(tmp_path_factory.mktemp("prometheus"), [f"127.0.0.1:{kubelet_agent.port}"])
    yield server
    server.stop()


@pytest.fixture(scope="module")
def busy_container(podman: Podman, workload_binaries: None) -> Iterator[str]:
    """A container that yields, waits on futexes, and spins 3 threads against half a CPU (throttled)."""
    options = ("--cpus", "0.5", *(arg for k, v in LABELS.items() for arg in ("--label", f"{k}={v}")))
    script = "/w/yielder - 200000 2 0; /w/futexer - 20 5000000 5 0; exec /w/spinner - 3 600 -1 0"
    container = podman.run("dashboard", "sh", "-c", script, options=options)
    yield container
    podman.remove(container)


def substitute(expr: str, variables: dict[str, str]) -> str:
    expr = expr.replace("$__rate_interval", "30s")
    for name, value in sorted(variables.items(), key=lambda item: -len(item[0])):
        expr = expr.replace(f"${name}", value)
    assert "$" not in expr, expr
    return expr


def test_every_panel_query_returns_data(
    prometheus: Prometheus, busy_container: str, kubelet_agent: AgentProcess
) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    node = f"127.0.0.1:{kubelet_agent.port}"
    # Wait until Prometheus has a few scrapes with the container named.
    deadline = time.monotonic() + 60
    while not prometheus.query('schedwatch_threads{container="api", pod="checkout", namespace="shop"}'):
        assert time.monotonic() < deadline, "the container's series never reached Prometheus: " + str(
            podman_state(busy_container)
        )
        time.sleep(1)

    # The variables' own queries find the node and the container.
    variables = {"node": node, "namespace": "shop", "pod": "checkout", "container": "api"}
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = substitute(variable["query"]["query"], variables)
        match = re.fullmatch(r"label_values\((.*), (\w+)\)", query)
        assert match, query
        values = prometheus.api(f"label/{match.group(2)}/values", **{"match[]": match.group(1)})
        assert variables[variable["name"]] in values, (variable["name"], values)

    def empty_panels() -> list[str]:
        empty = []
        for panel in dashboard["panels"]:
            for target in panel.get("targets", []):  # a row has none
                expr = substitute(target["expr"], variables)
                if not prometheus.query(expr):
                    empty.append(f"{panel['title']}: {expr}")
        return empty

    # rate() over 30 s windows has data from its second scrape on: asked again each second, not after a fixed sleep.
    deadline = time.monotonic() + 60
    while empty := empty_panels():
        assert time.monotonic() < deadline, "panels without data:\n" + "\n".join(empty)
        time.sleep(1)


def podman_state(container: str) -> str:
    import subprocess

    result = subprocess.run(["podman", "logs", container], capture_output=True, text=True)
    return result.stdout[-1000:] + result.stderr[-1000:]
