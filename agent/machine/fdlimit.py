"""The agent's limit on open files: raised once to its hard limit (capped), for what holds descriptors."""

from __future__ import annotations

import resource

FD_LIMIT_WANTED = 1 << 20


def raise_fd_limit() -> int:
    """Raise RLIMIT_NOFILE's soft limit to its hard limit (capped); the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = FD_LIMIT_WANTED if hard == resource.RLIM_INFINITY else min(hard, FD_LIMIT_WANTED)
    if soft == resource.RLIM_INFINITY or soft >= target:
        return FD_LIMIT_WANTED if soft == resource.RLIM_INFINITY else soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return target
    except (ValueError, OSError):
        return soft
