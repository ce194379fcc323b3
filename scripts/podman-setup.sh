#!/usr/bin/env bash
# Podman (and Docker, containerd) on this kind of host (hybrid cgroups, no registry), for the container tests:
#   - runc and the cgroupfs manager (crun refuses the hybrid layout; there is no systemd);
#   - a base image docker.io/library/debian:bookworm-slim built locally with debootstrap.
# Idempotent; run as root. Needs Debian's package mirror only.
set -euo pipefail

missing=()
for package in podman runc catatonit debootstrap containerd docker.io; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

conf=/etc/containers/containers.conf
if ! grep -q 'schedwatch' "$conf" 2>/dev/null; then
    mkdir -p /etc/containers
    cat > "$conf" <<'CONF'
# written by schedwatch scripts/podman-setup.sh
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
fi

image=docker.io/library/debian:bookworm-slim
if ! podman image exists "$image"; then
    root="$(mktemp -d /var/tmp/schedwatch-rootfs.XXXXXX)"
    debootstrap --variant=minbase bookworm "$root" >/dev/null
    tar -C "$root" -c . | podman import - "$image" >/dev/null
    rm -rf "$root"
fi
echo "podman ready: $(podman --version), image $image"
