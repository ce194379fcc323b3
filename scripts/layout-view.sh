#!/bin/sh
# layout-view.sh v1 COMMAND...: run COMMAND (as root) where this hybrid host looks like a cgroup v1-only one.
#
# In a mount namespace of its own the cgroup2 mount (/sys/fs/cgroup/unified) is hidden, so the agent and the tests
# see the v1 hierarchies alone, as on CentOS 7 or Docker CE's cgroupfs layout: workloads keyed by process and placed
# in systemd's named hierarchy. The host's mounts are untouched. (A v2-only view cannot be made here: the cpu,
# memory and other controllers are bound to v1 hierarchies; the platform tier's VMs have that layout.)
set -eu
view=${1:-}
[ "$view" = v1 ] || { echo "usage: $0 v1 COMMAND... (hide cgroup2: a v1-only layout)" >&2; exit 2; }
shift
[ "$#" -gt 0 ] || { echo "usage: $0 v1 COMMAND..." >&2; exit 2; }
unified=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)
[ -n "$unified" ] || { echo "$0: no cgroup2 mount to hide: this host is v1-only already" >&2; exit 2; }
exec unshare --mount --propagation private sh -c 'umount "$0" && exec "$@"' "$unified" "$@"
