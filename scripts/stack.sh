#!/usr/bin/env bash
# The local stack for people without Kubernetes: the agent, Prometheus with schedwatch's alert rules, and
# Alertmanager, from Debian's packages, all on 127.0.0.1. Ctrl-C (or SIGTERM) stops all three.
#   agent       http://127.0.0.1:17953/metrics
#   Prometheus  http://127.0.0.1:9090  (alerts: /alerts)
#   Alertmanager http://127.0.0.1:9093
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh run
missing=()
for package in prometheus prometheus-alertmanager; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
state="${STACK_DIR:-/var/tmp/schedwatch-stack}"
mkdir -p "$state"
promtool check config deploy/prometheus/prometheus.yml >/dev/null

pids=()
stop() {
    trap - INT TERM EXIT
    kill "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
}
trap stop INT TERM EXIT

.venv/bin/schedwatch run --listen 127.0.0.1:17953 --bpf-stats &
pids+=($!)
prometheus-alertmanager --config.file=deploy/prometheus/alertmanager.yml --storage.path="$state/alertmanager" \
    --web.listen-address=127.0.0.1:9093 --cluster.listen-address= >"$state/alertmanager.log" 2>&1 &
pids+=($!)
prometheus --config.file=deploy/prometheus/prometheus.yml --storage.tsdb.path="$state/prometheus" \
    --web.listen-address=127.0.0.1:9090 >"$state/prometheus.log" 2>&1 &
pids+=($!)
echo "schedwatch stack: agent http://127.0.0.1:17953/metrics, Prometheus http://127.0.0.1:9090," \
     "Alertmanager http://127.0.0.1:9093 (logs in $state); Ctrl-C stops it" >&2
wait -n "${pids[@]}"
