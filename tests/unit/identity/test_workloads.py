"""cgroup path -> container id, for the layouts of the common runtimes."""

from __future__ import annotations

import pytest

from agent.identity.labels import MAX_LABEL_LENGTH
from agent.identity.paths import container_anchor, container_id_from_path
from agent.identity.resolver import Identity
from agent.identity.workload import REMOVED, Workload, workload_for_cgroup
from agent.machine.cgroups.layout import parse_proc_cgroup
from tests.unit.locations import UNIT_FIXTURES

ID = "3f4e5d6c7b8a99887766554433221100ffeeddccbbaa00112233445566778899"


@pytest.mark.parametrize(
    "path",
    [
        f"/docker/{ID}",  # Docker, cgroupfs driver
        f"/system.slice/docker-{ID}.scope",  # Docker, systemd driver
        f"/kubepods/burstable/pod0b7a6c1e-1111-2222-3333-444455556666/{ID}",  # kubelet cgroupfs
        f"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0b7a6c1e_1111.slice/cri-containerd-{ID}.scope",
        f"/kubepods.slice/kubepods-pod0b7a.slice/crio-{ID}.scope",  # CRI-O, guaranteed QoS
        f"/machine.slice/libpod-{ID}.scope",  # Podman, systemd manager
        f"/libpod_parent/libpod-{ID}",  # Podman, cgroupfs manager
        f"/machine.slice/libpod-{ID}.scope/container",  # Podman with a nested container cgroup
        f"/system.slice/docker-{ID}.scope/init.scope",  # systemd running inside the container
        f"/kubepods-besteffort-pod0125ec2f_b64a.slice:cri-containerd:{ID}",  # runc's systemd driver, unmanaged v1
        f"/system.slice/containerd.service/kubepods-pod87a1.slice:cri-containerd:{ID}",
        "/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice"  # kind: the kubelet in a container
        f"/kubelet-kubepods-besteffort-pod1e59.slice/cri-containerd-{ID}.scope",
    ],
)
def test_container_id_found_in_every_runtime_layout(path: str) -> None:
    assert container_id_from_path(path) == ID
    assert workload_for_cgroup(path) == Workload(container_id=ID)


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/system.slice/ssh.service",
        "/user.slice/user-1000.slice/session-3.scope",
        f"/machine.slice/libpod-conmon-{ID}.scope",  # the container's monitor, not the container
        f"/kubepods.slice/crio-conmon-{ID}.scope",
        f"/kubepods-pod1.slice:crio-conmon:{ID}",
        "/system/etcd",  # Talos: containerd's system containers are named, not hex
        f"/system.slice/docker-{ID[:-1]}.scope",  # 63 hex digits
    ],
)
def test_not_a_container_keeps_its_cgroup_path(path: str) -> None:
    assert container_id_from_path(path) == ""
    assert workload_for_cgroup(path) == Workload(cgroup=path)


def test_removed_cgroup_has_one_catch_all_identity() -> None:
    assert workload_for_cgroup(None) == REMOVED
    assert REMOVED.labels() == ("", "", "", "", "(removed)")


def test_label_values_are_bounded() -> None:
    path = "/" + "a" * 1000 + "/tail.service"
    label = workload_for_cgroup(path).cgroup
    assert len(label) == MAX_LABEL_LENGTH
    assert label.endswith("/tail.service")


def test_undecodable_cgroup_name_is_shown_as_escapes() -> None:
    path = "/bad\udcffname/x"  # b"/bad\xffname/x" as agent.machine.procfs.decode reads it
    assert workload_for_cgroup(path) == Workload(cgroup="/bad\\xffname/x")


FIXTURES = UNIT_FIXTURES / "proc-cgroup"


@pytest.mark.parametrize(
    ("fixture", "container_id"),
    [
        ("podman-cgroupfs-hybrid.txt", "3924523d9c3bcb90a174c0424c1b02cebd0730b5cefd89c7774b163e3e25cb21"),
        # In a pod the pod's own cgroup (a bare 64-hex id) sits above the container's: the deepest one wins.
        ("podman-pod-cgroupfs-hybrid.txt", "63205364e3141d6d4e97fb3a111131757c5e0fb3660ff095ea6ac224d1bf2933"),
        ("containerd-ctr-k8s.io-hybrid.txt", "bc69956ec00e6bab8219c544af8ae2f02a254635e5a0d90a5e507f3b02a09daf"),
        ("docker-cgroupfs-hybrid.txt", "31f05cc547ce94c78c2dbe5a0fc8c245bee095e1eb627dd22461e71eac927a5d"),
        # Made through containerd's CRI as the kubelet (cgroupfs driver) makes them: /kubepods/burstable/pod<uid>/<id>.
        (
            "containerd-cri-kubepods-burstable-hybrid.txt",
            "c226197d77daeb74fcee517f102be7a427c9583b27d2b9f017842f2d0f565d97",
        ),
        (
            "containerd-cri-kubepods-burstable-sandbox-hybrid.txt",
            "26e321fc2d95d1d8d26c74a06977ec47745402d86c03bda59db74be0ff3d42eb",
        ),
    ],
)
def test_real_proc_cgroup_files(fixture: str, container_id: str) -> None:
    paths = parse_proc_cgroup((FIXTURES / fixture).read_text())
    assert container_id_from_path(paths[""]) == container_id  # the cgroup2 line
    assert container_id_from_path(paths["cpu"]) == container_id  # the v1 cpu line agrees


@pytest.mark.parametrize(
    ("fixture", "container_id"),
    [
        ("containerd-systemd-v1-besteffort.txt", "ee4b20e90ac7f42a10bd004d05646b13d8ab5e2c5e7cbc01abf8006bac016459"),
        ("containerd-systemd-v1-burstable.txt", "6ef14b5a76df7b5d24285e3a04ccbc6fd323620272b3787b5dc440fc1b75d294"),
        (
            "docker-systemd-v1-kubepods-burstable.txt",
            "d0b3604b67ac7930dd34ba3a796627e3e4717d12309e90a4afe3f38b6816ac98",
        ),
        ("crio-systemd-v1-kubepods-burstable.txt", "00601ecc8806271163e6f8e8456d1614817bc5e6d7fa19025fea6fb0b373e7bb"),
        ("crio-systemd-v1-host-process.txt", "5eed917563583925ffdbd40a64efb2aaffe58638e57add8becaf460fe74f5b1c"),
    ],
)
def test_proc_cgroup_files_from_other_hosts(fixture: str, container_id: str) -> None:
    """Every hierarchy that places the process in a container names the same container (fixtures/README.md)."""
    lines = (FIXTURES / fixture).read_text().splitlines()
    named = {container_id_from_path(line.split(":", 2)[2]) for line in lines}
    assert named - {""} == {container_id}


def test_a_v1_host_service_is_its_cgroup() -> None:
    paths = parse_proc_cgroup((FIXTURES / "centos7-v1-system-slice.txt").read_text())
    assert workload_for_cgroup(paths["name=systemd"]) == Workload(cgroup="/system.slice")


class Names:
    def __init__(self, known: dict[str, Identity]) -> None:
        self.known = known
        self.asked: list[str] = []

    def get(self, container_id: str) -> Identity | None:
        self.asked.append(container_id)
        return self.known.get(container_id)


def test_names_come_from_the_runtime_once_known() -> None:
    path = f"/kubepods.slice/kubepods-pod1.slice/cri-containerd-{ID}.scope"
    names = Names({ID: Identity(container="app", pod="web-7d4", namespace="shop", anchors=frozenset({path}))})
    assert workload_for_cgroup(path, names) == Workload(ID, "app", "web-7d4", "shop")
    assert workload_for_cgroup(path + "/nested", names) == Workload(ID, "app", "web-7d4", "shop")
    assert workload_for_cgroup("/docker/" + "0" * 64, names) == Workload(container_id="0" * 64)
    assert workload_for_cgroup("/system.slice/cron.service", names) == Workload(cgroup="/system.slice/cron.service")
    assert names.asked == [ID, ID, "0" * 64], "only container ids are looked up"


def test_a_cgroup_named_like_a_container_elsewhere_is_not_that_container() -> None:
    real = f"/machine.slice/libpod-{ID}.scope"
    names = Names({ID: Identity(container="db", anchors=frozenset({real}))})
    for spoof in (
        f"/user.slice/evil/{ID}",
        f"/user.slice/evil/libpod-{ID}.scope",
        f"/machine.slice/x/libpod-{ID}.scope",
    ):
        assert workload_for_cgroup(spoof, names) == Workload(cgroup=spoof), spoof


def test_names_without_a_process_to_check_them_are_not_given() -> None:
    names = Names({ID: Identity(container="db", anchors=None)})
    assert workload_for_cgroup(f"/docker/{ID}", names) == Workload(container_id=ID)


def test_anchor_is_the_path_up_to_the_container_component() -> None:
    assert container_anchor(f"/machine.slice/libpod-{ID}.scope/container/x") == (
        ID,
        f"/machine.slice/libpod-{ID}.scope",
    )
    assert container_anchor("/system.slice/cron.service") == ("", "")
