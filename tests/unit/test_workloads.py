"""cgroup path -> container id, for the layouts of the common runtimes."""

from __future__ import annotations

import pytest

from agent.workloads import MAX_LABEL_LENGTH, REMOVED, Workload, container_id_from_path, workload_for_cgroup

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
        f"/system.slice/docker-{ID[:-1]}.scope",  # 63 hex digits
    ],
)
def test_not_a_container_keeps_its_cgroup_path(path: str) -> None:
    assert container_id_from_path(path) == ""
    assert workload_for_cgroup(path) == Workload(cgroup=path)


def test_removed_cgroup_has_one_catch_all_identity() -> None:
    assert workload_for_cgroup(None) == REMOVED
    assert REMOVED.labels() == ("", "(removed)")


def test_label_values_are_bounded() -> None:
    path = "/" + "a" * 1000 + "/tail.service"
    label = workload_for_cgroup(path).cgroup
    assert len(label) == MAX_LABEL_LENGTH
    assert label.endswith("/tail.service")
