"""How much slower than this machine the tests run: 1 here, more in an emulated platform VM (tests/platforms)."""

from __future__ import annotations

import os


def slowdown() -> float:
    """SCHEDWATCH_TEST_SLOWDOWN (set by the platform tier for a guest whose CPU QEMU emulates), else 1: waits for
    the agent to compile its programs and answer scale by it, never the assertions on counts."""
    return max(1.0, float(os.environ.get("SCHEDWATCH_TEST_SLOWDOWN", "1")))
