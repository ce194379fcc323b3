# schedwatch agent image, in two stages:
#   build:   Debian bookworm-slim with python3, bcc from Debian (python3-bpfcc, libbpfcc with LLVM/clang), the project
#            installed with pip into the venv /opt/schedwatch; then scripts/image-rootfs.sh gathers what runs.
#   runtime: from scratch, only that tree: Python, the venv, bcc and the shared libraries they load (see
#            scripts/image-rootfs.sh for the list and why), no package manager, shell tools or docs.
# Kernel headers are not in the image: they come from the host's /lib/modules and /usr/src (see the DaemonSet),
# found in the same order as `schedwatch check` reports. Size and start time: docs/benchmarks.md.
FROM docker.io/library/debian:bookworm-slim AS build

# gcc: only for the stub libraries that scripts/image-rootfs.sh builds.
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-bpfcc ca-certificates xz-utils \
        gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*

# PIP_CERT: a CA bundle for a TLS-inspecting proxy in front of the package index, if the build host has one
# (scripts/build-image.sh mounts the host's bundle and passes it here). Empty: pip's own.
ARG PIP_CERT=
COPY pyproject.toml README.md /src/
COPY agent /src/agent
COPY bpf /src/bpf
# --system-site-packages: bcc's Python package comes from Debian (python3-bpfcc), the rest from pip.
# pip and setuptools only install: they leave the venv.
RUN if [ -n "$PIP_CERT" ]; then export PIP_CERT; else unset PIP_CERT; fi \
    && python3.11 -m venv --system-site-packages /opt/schedwatch \
    && /opt/schedwatch/bin/pip install --no-cache-dir --disable-pip-version-check /src \
    && /opt/schedwatch/bin/pip uninstall --yes --disable-pip-version-check pip setuptools \
    && rm -rf /src /root/.cache /opt/schedwatch/lib/python3.11/site-packages/_distutils_hack \
        /opt/schedwatch/lib/python3.11/site-packages/distutils-precedence.pth \
    && python3.11 -m compileall -q /opt/schedwatch/lib /usr/lib/python3/dist-packages/bcc

COPY scripts/image-rootfs.sh /usr/local/bin/
RUN image-rootfs.sh /rootfs

FROM scratch
COPY --from=build /rootfs /
ENV PATH=/opt/schedwatch/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
EXPOSE 17953
ENTRYPOINT ["schedwatch"]
CMD ["run", "--listen=0.0.0.0:17953"]
