#!/usr/bin/env bash
# Install what schedwatch needs on Debian or Ubuntu and prepare .venv. Idempotent; run as root.
#   scripts/setup.sh run     bcc, kernel headers, the Python environment
#   scripts/setup.sh test    + compiler, promtool, Alertmanager, bpftool, perf, bpftrace, strace, headless chromium,
#                              QEMU, busybox and udev for the platform tier's VMs (virtme-ng comes with the venv)
#                              (what the tests use; the container tests add Podman, Docker and containerd, the deploy
#                              tests need kubectl)
#   scripts/setup.sh bench   + the peers the benchmarks compare against (perf, strace, bcc tools)
set -euo pipefail
cd "$(dirname "$0")/.."
purpose="${1:-run}"

if [ "$(id -u)" -ne 0 ]; then
    echo "setup: needs root (apt-get, BPF): run it with sudo" >&2
    exit 1
fi

packages=(python3 python3-venv python3-bpfcc)
case "$purpose" in
    run) ;;
    test) packages+=(gcc libc6-dev bpftool prometheus prometheus-alertmanager util-linux linux-perf bpftrace strace chromium fonts-dejavu-core
                     qemu-system-x86 busybox-static kmod udev file) ;;
    bench) packages+=(gcc libc6-dev bpftool bpfcc-tools bpftrace linux-perf strace util-linux prometheus-node-exporter) ;;
    *) echo "setup: unknown purpose '$purpose' (run, test or bench)" >&2; exit 2 ;;
esac

# Kernel headers for bcc: the running kernel's own if the archive has them, else the nearest
# Debian headers (schedwatch's programs read only tracepoint fields, so a nearby version works).
release="$(uname -r)"
if [ ! -e "/lib/modules/$release/build/include" ] && [ ! -e "/lib/modules/$release/source/include" ] \
    && [ ! -e /sys/kernel/kheaders.tar.xz ] && [ -z "${BCC_KERNEL_SOURCE:-}" ]; then
    headers="linux-headers-$release"
    need_headers=1
else
    need_headers=0
fi

missing=()
for package in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" || missing+=("$package")
done
if [ "$need_headers" = 1 ] && ! ls -d /usr/src/linux-headers-* >/dev/null 2>&1; then
    missing+=(__headers__)
fi
if [ ${#missing[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    installable=()
    for package in "${missing[@]}"; do
        [ "$package" = __headers__ ] || installable+=("$package")
    done
    if [ "$need_headers" = 1 ] && ! ls -d /usr/src/linux-headers-* >/dev/null 2>&1; then
        if apt-cache show "$headers" >/dev/null 2>&1; then
            installable+=("$headers")
        else
            arch="$(dpkg --print-architecture)"
            if apt-cache show "linux-headers-cloud-$arch" >/dev/null 2>&1; then
                installable+=("linux-headers-cloud-$arch")
            else
                installable+=("linux-headers-$arch")
            fi
            echo "setup: no headers packaged for kernel $release; installing the nearest Debian headers" >&2
        fi
    fi
    apt-get install -y -q --no-install-recommends "${installable[@]}"
fi

# bcc is a Debian package for the system Python; the venv sees it through system site-packages.
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c "import bcc" >/dev/null 2>&1; then
    rm -rf .venv
    /usr/bin/python3 -m venv --system-site-packages .venv
fi
extras=""
[ "$purpose" = run ] || extras="[dev]"
stamp=".venv/.installed-$purpose"
if [ ! -e "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
    .venv/bin/python -m pip install -q --disable-pip-version-check -e ".$extras"
    touch "$stamp"
fi
