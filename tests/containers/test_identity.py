"""Series name their container, pod and namespace, as the runtimes report them."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from tests.containers.conftest import GRACE_SECONDS
from tests.support.agent import AgentProcess
from tests.support.containers import Containerd, Podman, random_container_id, silent_socket
from tests.support.scrape import Scrape

YIELDS = "schedwatch_sched_yield_calls_total"
# runc's init (a Go program) runs in the container's cgroup until it execs the entrypoint, and the Go runtime
# can yield once or twice on its way: the workload's own count is exact, the container's may carry these few.
RUNC_INIT_YIELDS = 3


def yielded(scrape: Scrape, expected: int, **labels: str) -> bool:
    value = scrape.value(YIELDS, **labels)
    return value is not None and expected <= value <= expected + RUNC_INIT_YIELDS


def eventually(agent: AgentProcess, check: Callable[[Scrape], bool], timeout: float = 30.0) -> Scrape:
    """Scrape until *check* holds (names arrive in the background); fail with the last scrape."""
    deadline = time.monotonic() + timeout
    while True:
        scrape = agent.scrape()
        if check(scrape):
            return scrape
        if time.monotonic() > deadline:
            raise AssertionError(f"not true within {timeout}s; agent log:\n{agent.log()[-3000:]}")
        time.sleep(0.3)


def labels_of(scrape: Scrape, name: str, container_id: str) -> dict[str, str]:
    found = scrape.find(name, container_id=container_id)
    assert len(found) == 1, found
    return dict(next(iter(found)))


def test_two_podman_containers_get_their_own_counts_and_names(container_agent: AgentProcess, podman: Podman) -> None:
    # Both start after the agent: they must be picked up.
    yielding = podman.run("yield", "sh", "-c", "/w/yielder - 25000 2 0 && exec sleep 600")
    sleeping = podman.run("sleep", "/w/sleeper", "-", "1000", "1000000", "0")
    name = str(podman.inspect(yielding)["Name"])
    scrape = eventually(
        container_agent,
        lambda s: (
            s.value(YIELDS, container_id=yielding, container=name) == 50_000
            and bool(
                s.find("schedwatch_offcpu_seconds_total", container_id=sleeping, container=f"{podman.prefix}-sleep")
            )
        ),
    )
    assert labels_of(scrape, YIELDS, yielding) == {
        "container_id": yielding,
        "container": name,
        "pod": "",
        "namespace": "",
        "cgroup": "",
    }
    assert (scrape.value(YIELDS, container_id=sleeping) or 0) <= RUNC_INIT_YIELDS
    # The sleeper's wake-ups are its own: about a thousand 1 ms sleeps.
    blocked = scrape.value("schedwatch_offcpu_seconds_total", container_id=sleeping, reason="blocked")
    assert blocked is not None and blocked > 0.1


def test_stopped_container_disappears_after_the_grace_period(container_agent: AgentProcess, podman: Podman) -> None:
    container = podman.run("stopper", "sh", "-c", "/w/yielder - 1000 1 0 && exec sleep 600")
    before = eventually(container_agent, lambda s: yielded(s, 1000, container_id=container))
    podman.remove(container)
    # Kept (same value) right after the container is gone...
    assert container_agent.scrape().value(YIELDS, container_id=container) == before.value(
        YIELDS, container_id=container
    )
    time.sleep(GRACE_SECONDS + 1)
    # ...dropped after the grace period.
    eventually(container_agent, lambda s: s.value(YIELDS, container_id=container) is None, timeout=5)


def test_podman_pod_with_kubernetes_labels(container_agent: AgentProcess, podman: Podman) -> None:
    import subprocess

    pod = f"{podman.prefix}-pod"
    subprocess.run(["podman", "pod", "create", "--name", pod], check=True, capture_output=True)
    labels = {
        "io.kubernetes.pod.name": "checkout-6b9f",
        "io.kubernetes.pod.namespace": "shop",
        "io.kubernetes.container.name": "api",
    }
    options = ("--pod", pod, *(arg for k, v in labels.items() for arg in ("--label", f"{k}={v}")))
    container = podman.run("inpod", "sh", "-c", "/w/yielder - 777 1 0 && exec sleep 600", options=options)
    scrape = eventually(container_agent, lambda s: yielded(s, 777, container_id=container, pod="checkout-6b9f"))
    assert labels_of(scrape, YIELDS, container) == {
        "container_id": container,
        "container": "api",
        "pod": "checkout-6b9f",
        "namespace": "shop",
        "cgroup": "",
    }


def test_containerd_k8s_namespace_container_resolves_to_its_pod(
    container_agent: AgentProcess, containerd: Containerd
) -> None:
    container_id = random_container_id()
    labels = {
        "io.kubernetes.pod.name": "payments-5c7d",
        "io.kubernetes.pod.namespace": "billing",
        "io.kubernetes.container.name": "worker",
    }
    containerd.run(container_id, labels, "sh", "-c", "/w/yielder - 4242 2 0 && exec sleep 600")
    scrape = eventually(container_agent, lambda s: yielded(s, 8484, container_id=container_id, pod="payments-5c7d"))
    assert labels_of(scrape, YIELDS, container_id) == {
        "container_id": container_id,
        "container": "worker",
        "pod": "payments-5c7d",
        "namespace": "billing",
        "cgroup": "",
    }


def test_runtime_that_never_answers_does_not_slow_scrapes(podman: Podman, tmp_path: Path) -> None:
    hanging = silent_socket(Path("/run/schedwatch-test/hanging.sock"))
    agent = AgentProcess(
        tmp_path / "agent.log",
        "--runtime.docker-sockets",
        "/run/schedwatch-test/hanging.sock",
        "--runtime.containerd-socket",
        "",
        "--runtime.timeout",
        "5",
        "--state-dir",
        str(tmp_path),
    )
    try:
        agent.wait_ready()
        container = podman.run("unnamed", "sh", "-c", "/w/yielder - 500 1 0 && exec sleep 600")
        durations = []
        deadline = time.monotonic() + 4
        scrape = agent.scrape()
        while time.monotonic() < deadline:
            started = time.monotonic()
            scrape = agent.scrape()
            durations.append(time.monotonic() - started)
            time.sleep(0.2)
        assert max(durations) < 0.5, f"scrapes took up to {max(durations):.2f}s while the runtime hung"
        assert labels_of(scrape, YIELDS, container) == {
            "container_id": container,
            "container": "",
            "pod": "",
            "namespace": "",
            "cgroup": "",
        }
        assert yielded(scrape, 500, container_id=container)
    finally:
        assert agent.stop() == 0
        hanging.close()
