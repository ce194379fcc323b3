"""Series name their container, pod and namespace, as the runtimes report them."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from agent.identity.runtimes import ContainerInfo
from agent.identity.runtimes.cri import CriClient
from agent.machine.cgroups.layout import read_layout
from tests.containers.conftest import GRACE_SECONDS
from tests.support.agent import AgentProcess, kubelet_docker_agent
from tests.support.containers import (
    IMAGE,
    REPO,
    RUN_DIR,
    Containerd,
    Podman,
    container_pid,
    random_container_id,
    silent_socket,
)
from tests.support.cri import CriDriver, Pod
from tests.support.scrape import Scrape

YIELDS = "schedwatch_sched_yield_calls_total"
# runc's init (a Go program) runs in the container's cgroup until it execs the entrypoint, and the Go runtime
# yields now and then on its way (more on a cold machine): the workload's own count, per process, is exact;
# the container's may carry these few more.
RUNC_INIT_YIELDS = 50
BINARIES = REPO / "tests" / ".build"


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
            seen = {k: v for k, v in scrape.samples.items() if k[0] in (YIELDS, "schedwatch_runtime_lookups_total")}
            raise AssertionError(f"not true within {timeout}s; last scrape: {seen}\nagent log:\n{agent.log()[-3000:]}")
        time.sleep(0.3)


def child_of(pid: int, timeout: float = 10.0) -> int:
    """The one child process of *pid*, once it exists."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.05)
    raise AssertionError(f"{pid} started no child")


def labels_of(scrape: Scrape, name: str, container_id: str) -> dict[str, str]:
    found = scrape.find(name, container_id=container_id)
    assert len(found) == 1, found
    return dict(next(iter(found)))


def test_two_podman_containers_get_their_own_counts_and_names(container_agent: AgentProcess, podman: Podman) -> None:
    # Both start after the agent: they must be picked up. -i keeps stdin open, so the workloads hold. The
    # yielder runs under sh: the container's first process was runc's init before exec, with its yields.
    yielding = podman.run("yield", "sh", "-c", "/w/yielder - 25000 2 1; true", options=("-i",))
    yielder_pid = child_of(container_pid(podman, yielding))
    sleeping = podman.run("sleep", "/w/sleeper", "-", "1000", "1000000", "1", options=("-i",))
    name = str(podman.inspect(yielding)["Name"])
    scrape = eventually(
        container_agent,
        lambda s: (
            yielded(s, 50_000, container_id=yielding, container=name)
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
    # The sleeper is exported (its blocked time), and yields at most what runc's init did before exec:
    # none of the yielding container's calls are given to it. No yield series at all is 0 yields.
    assert scrape.value("schedwatch_offcpu_seconds_total", container_id=sleeping, reason="blocked") is not None
    assert (scrape.value(YIELDS, container_id=sleeping) or 0) <= RUNC_INIT_YIELDS
    process = scrape.find("schedwatch_process_sched_yield_calls_total", pid=str(yielder_pid))
    assert list(process.values()) == [50_000], process
    assert dict(next(iter(process)))["container"] == name
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


KUBERNETES_LABELS = {
    "io.kubernetes.pod.name": "checkout-6b9f",
    "io.kubernetes.pod.namespace": "shop",
    "io.kubernetes.container.name": "api",
}


def podman_in_pod_with_kubernetes_labels(podman: Podman, name: str, count: int) -> str:
    import subprocess

    pod = f"{podman.prefix}-{name}-pod"
    subprocess.run(["podman", "pod", "create", "--name", pod], check=True, capture_output=True)
    options = ("--pod", pod, *(arg for k, v in KUBERNETES_LABELS.items() for arg in ("--label", f"{k}={v}")))
    return podman.run(name, "sh", "-c", f"/w/yielder - {count} 1 0 && exec sleep 600", options=options)


def test_kubernetes_labels_set_by_a_podman_user_claim_no_pod(container_agent: AgentProcess, podman: Podman) -> None:
    # Anyone who may use the Podman (or Docker) socket can set io.kubernetes.* labels: the agent, not told that
    # this runtime is the kubelet's, exports the container under its own name and no pod or namespace.
    container = podman_in_pod_with_kubernetes_labels(podman, "claims", 778)
    name = str(podman.inspect(container)["Name"])
    scrape = eventually(container_agent, lambda s: yielded(s, 778, container_id=container, container=name))
    assert labels_of(scrape, YIELDS, container) == {
        "container_id": container,
        "container": name,
        "pod": "",
        "namespace": "",
        "cgroup": "",
    }


def test_kubelet_docker_runtime_names_pod_and_namespace(podman: Podman, tmp_path: Path) -> None:
    # Told that this Docker API is the kubelet's runtime (cri-dockerd), the agent trusts the kubelet's labels.
    agent = kubelet_docker_agent(tmp_path, podman.socket)
    try:
        agent.wait_ready()
        container = podman_in_pod_with_kubernetes_labels(podman, "inpod", 777)
        scrape = eventually(agent, lambda s: yielded(s, 777, container_id=container, pod="checkout-6b9f"))
        assert labels_of(scrape, YIELDS, container) == {
            "container_id": container,
            "container": "api",
            "pod": "checkout-6b9f",
            "namespace": "shop",
            "cgroup": "",
        }
        lookups = scrape.value("schedwatch_runtime_lookups_total", runtime="kubelet-docker", result="ok")
        assert lookups is not None and lookups >= 1, "the kubelet's Docker API was never asked"
    finally:
        assert agent.stop() == 0, agent.log()


def test_a_cgroup_named_like_a_running_container_is_not_that_container(
    container_agent: AgentProcess, podman: Podman
) -> None:
    # A tenant who can make cgroups names one after a running container (bare id, and as Podman's scope): the
    # runtime's process for that container is not in it, so it is exported as the plain cgroup it is.
    from tests.support.workloads import CgroupSandbox, Workload, build

    victim = podman.run("victim", "sh", "-c", "/w/yielder - 321 1 0 && exec sleep 600")
    name = str(podman.inspect(victim)["Name"])
    eventually(container_agent, lambda s: yielded(s, 321, container_id=victim, container=name))
    sandbox = CgroupSandbox()
    spoofs = []
    try:
        for index, component in enumerate((victim, f"libpod-{victim}.scope")):
            group = sandbox.make("spoof") / component
            group.mkdir()
            spoofs.append((sandbox.relative(group), Workload(build("yielder"), group, 5000 + index, 1)))
        scrape = eventually(
            container_agent,
            lambda s: all(s.value(YIELDS, cgroup=path, container_id="") == w.truth["yields"] for path, w in spoofs),
        )
        for path, workload in spoofs:
            assert scrape.value(YIELDS, cgroup=path, container_id="") == workload.truth["yields"]
            labels = dict(next(iter(scrape.find("schedwatch_process_sched_yield_calls_total", pid=str(workload.pid)))))
            assert labels["container_id"] == "" and labels["container"] == "" and labels["cgroup"] == path
        # The container keeps its own names and its own count, none of the spoofs' yields.
        assert labels_of(scrape, YIELDS, victim)["container"] == name
        assert yielded(scrape, 321, container_id=victim, container=name)
    finally:
        for _, workload in spoofs:
            workload.release()
        for child in sorted(sandbox.base.glob("*/*"), reverse=True):
            if child.is_dir():
                sandbox.remove(child)
        sandbox.cleanup()


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


def cgroup2_dir(path: str) -> Path:
    """The cgroup2 directory of *path* on this host."""
    unified = read_layout().unified
    assert unified is not None, "no cgroup2 mount on this host"
    return unified / path.lstrip("/")


def test_kubelet_pods_made_through_the_cri_name_container_pod_and_namespace(
    container_agent: AgentProcess, cri: CriDriver
) -> None:
    # One pod per QoS class, each where the kubelet's cgroupfs driver puts it, each yielding a different count.
    started = []
    for qos, count in (("guaranteed", 1111), ("burstable", 2222), ("besteffort", 3333)):
        pod = Pod(f"pool-{qos}-7d9f", "ml-team", qos)
        cri.run_pod(pod)
        command = ["sh", "-c", f"/w/yielder - {count} 1 0 && exec sleep 600"]
        container_id = cri.start_container(pod, "trainer", IMAGE, command, mounts={str(BINARIES): "/w"})
        assert (cgroup2_dir(pod.cgroup_parent) / container_id / "cgroup.procs").exists()
        started.append((pod, container_id, count))
    for pod, container_id, count in started:
        scrape = eventually(
            container_agent, lambda s, n=count, c=container_id, p=pod.name: yielded(s, n, container_id=c, pod=p)
        )
        assert labels_of(scrape, YIELDS, container_id) == {
            "container_id": container_id,
            "container": "trainer",
            "pod": pod.name,
            "namespace": "ml-team",
            "cgroup": "",
        }
        # The sandbox's own cgroup (the pause process) is the pod's infrastructure: container "POD" (its name arrives
        # in the background, as every name does: its series may show first with the pod's name alone).
        eventually(
            container_agent,
            lambda s, sandbox=pod.sandbox_id, name=pod.name: (
                {(labels["container"], labels["pod"]) for labels in series_of(s, sandbox)} == {("POD", name)}
            ),
        )
    assert (scrape.value("schedwatch_runtime_lookups_total", runtime="cri:containerd", result="ok") or 0) >= 6


def test_cri_container_without_kubelet_labels_gets_its_pod_from_the_sandbox(
    container_agent: AgentProcess, cri: CriDriver
) -> None:
    pod = Pod("batch-0", "etl")
    cri.run_pod(pod)
    command = ["sh", "-c", "/w/yielder - 777 1 0 && exec sleep 600"]
    container_id = cri.start_container(pod, "loader", IMAGE, command, {str(BINARIES): "/w"}, kubelet_labels=False)
    scrape = eventually(container_agent, lambda s: yielded(s, 777, container_id=container_id, pod="batch-0"))
    assert labels_of(scrape, YIELDS, container_id)["container"] == "loader"
    assert labels_of(scrape, YIELDS, container_id)["namespace"] == "etl"


def test_cri_client_speaks_both_api_versions_and_knows_unknown_ids(containerd: Containerd, cri: CriDriver) -> None:
    pod = Pod("versions-0", "default")
    cri.run_pod(pod)
    container_id = cri.start_container(pod, "idle", IMAGE, ["sleep", "600"])
    expected = ContainerInfo(container="idle", pod="versions-0", namespace="default")
    for versions in (("runtime.v1",), ("runtime.v1alpha2",), ("runtime.v0", "runtime.v1")):
        client = CriClient(containerd.socket, timeout=5, api_versions=versions)
        info = client.inspect(container_id)
        assert info is not None and replace(info, pid=0) == expected, versions
        assert container_id in Path(f"/proc/{info.pid}/cgroup").read_text(), "the pid is the container's process"
        sandbox = client.inspect(pod.sandbox_id)
        assert sandbox is not None
        assert replace(sandbox, pid=0) == ContainerInfo(container="POD", pod="versions-0", namespace="default")
        assert pod.sandbox_id in Path(f"/proc/{sandbox.pid}/cgroup").read_text()
        assert client.inspect(random_container_id()) is None
    assert CriClient(RUN_DIR / "no-such-runtime.sock").inspect(container_id) is None


def series_of(scrape: Scrape, container_id: str) -> list[dict[str, str]]:
    """Label sets of every workload series of *container_id*, whatever the metric."""
    return [dict(labels) for (_, labels) in scrape.samples if ("container_id", container_id) in labels]


def test_v1_only_host_names_podman_and_kubelet_containers(
    podman: Podman, containerd: Containerd, cri: CriDriver, tmp_path: Path
) -> None:
    # The agent in a mount namespace without cgroup2 sees a v1-only host: it keys by process and places each
    # process by its v1 cgroups, where runc puts containers just as it does on real v1 hosts.
    cgroup2 = cgroup2_dir("/")
    agent = AgentProcess(
        tmp_path / "agent.log",
        "--runtime.docker-sockets",
        str(podman.socket),
        "--runtime.cri-sockets",
        str(containerd.socket),
        "--state-dir",
        str(tmp_path),
        prefix=("unshare", "-m", "sh", "-c", f'umount {cgroup2} && exec "$@"', "sh"),
    )
    try:
        agent.wait_ready()
        assert '"workloads_by": "process"' in agent.log()
        # Both yielders exit the moment their yields are done, likely before the agent reads their /proc entries:
        # they are placed where the shell that forked them is.
        container = podman.run("v1only", "sh", "-c", "/w/yielder - 3000 2 0; /w/yielder - 1000 1 0; exec sleep 600")
        name = str(podman.inspect(container)["Name"])
        pod = Pod("legacy-0", "ops")
        cri.run_pod(pod)
        command = ["sh", "-c", "/w/yielder - 1500 2 0; exec sleep 600"]
        in_pod = cri.start_container(pod, "batch", IMAGE, command, mounts={str(BINARIES): "/w"})
        scrape = eventually(
            agent,
            lambda s: (
                yielded(s, 7000, container_id=container, container=name)
                and yielded(s, 3000, container_id=in_pod, pod="legacy-0")
            ),
        )
        assert labels_of(scrape, YIELDS, in_pod) == {
            "container_id": in_pod,
            "container": "batch",
            "pod": "legacy-0",
            "namespace": "ops",
            "cgroup": "",
        }
    finally:
        assert agent.stop() == 0, agent.log()


def test_runtime_that_never_answers_does_not_slow_scrapes(podman: Podman, tmp_path: Path) -> None:
    # One socket that accepts and never answers stands in for each kind of runtime API (HTTP, CRI, containerd).
    hanging = silent_socket(Path("/run/schedwatch-test/hanging.sock"))
    agent = AgentProcess(
        tmp_path / "agent.log",
        "--runtime.docker-sockets",
        "/run/schedwatch-test/hanging.sock",
        "--runtime.cri-sockets",
        "/run/schedwatch-test/hanging.sock",
        "--runtime.containerd-socket",
        "/run/schedwatch-test/hanging.sock",
        "--runtime.timeout",
        "1.5",
        "--state-dir",
        str(tmp_path),
    )
    try:
        agent.wait_ready()
        container = podman.run("unnamed", "sh", "-c", "/w/yielder - 500 1 0 && exec sleep 600")
        durations = []
        deadline = time.monotonic() + 6
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
        for runtime in ("docker", "cri:hanging", "containerd"):  # each was asked, and each timed out
            assert (scrape.value("schedwatch_runtime_lookups_total", runtime=runtime, result="error") or 0) >= 1, (
                runtime
            )
    finally:
        assert agent.stop() == 0
        hanging.close()
