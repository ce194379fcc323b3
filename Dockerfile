# schedwatch agent image: Debian bookworm-slim, bcc from Debian, the project installed with pip.
# Kernel headers are not in the image: they come from the host's /lib/modules and /usr/src (see the DaemonSet),
# found in the same order as `schedwatch check` reports.
FROM docker.io/library/debian:bookworm-slim

RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-bpfcc python3-rich ca-certificates \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*

# PIP_CERT: a CA bundle for a TLS-inspecting proxy in front of the package index, if the build host has one
# (scripts/build-image.sh mounts the host's bundle and passes it here). Empty: pip's own.
ARG PIP_CERT=
COPY pyproject.toml README.md /src/
COPY agent /src/agent
COPY bpf /src/bpf
RUN if [ -n "$PIP_CERT" ]; then export PIP_CERT; else unset PIP_CERT; fi \
    && python3 -m venv --system-site-packages /opt/schedwatch \
    && /opt/schedwatch/bin/pip install --no-cache-dir --disable-pip-version-check /src \
    && rm -rf /src /root/.cache

ENV PATH=/opt/schedwatch/bin:$PATH
EXPOSE 17953
ENTRYPOINT ["schedwatch"]
CMD ["run", "--listen=0.0.0.0:17953"]
