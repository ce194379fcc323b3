#!/usr/bin/env bash
# Build the agent image with Podman from a local base image (scripts/podman-setup.sh makes it with debootstrap;
# no registry needed). Usage: scripts/build-image.sh [TAG [CONTAINERFILE]]
#   default: the agent, localhost/schedwatch:0.1.0 from ./Dockerfile; the context is the file's directory.
set -euo pipefail
cd "$(dirname "$0")/.."
tag="${1:-localhost/schedwatch:0.1.0}"
file="${2:-Dockerfile}"
scripts/podman-setup.sh >/dev/null
extra=()
# If this host reaches the package index through a proxy with its own CA, lend the build the host's bundle.
bundle=/etc/ssl/certs/ca-certificates.crt
if pip config list 2>/dev/null | grep -q "cert=" || grep -qs "^cert" /etc/pip.conf; then
    extra+=(--volume "$bundle:/etc/ssl/host-ca.crt:ro" --build-arg PIP_CERT=/etc/ssl/host-ca.crt)
fi
podman build --pull=never "${extra[@]}" -t "$tag" -f "$file" "$(dirname "$file")"
echo "built $tag ($(podman image inspect "$tag" --format '{{.Size}}' | awk '{printf "%.0f MB", $1/1e6}'))"
