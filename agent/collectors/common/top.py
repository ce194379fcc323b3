"""Which K processes are worth a series of their own: the most active since the last scrape, then overall."""

from __future__ import annotations


class TopProcesses:
    """Chooses the K processes worth a series: the most active since the last scrape, then overall."""

    def __init__(self, k: int) -> None:
        self.k = k
        self._previous: dict[int, int] = {}

    def select(self, activity: dict[int, int]) -> list[int]:
        """Pids to export, given each live process's cumulative activity count."""
        recent = {pid: total - self._previous.get(pid, 0) for pid, total in activity.items()}
        self._previous = activity
        active = [pid for pid, total in activity.items() if total > 0]
        return sorted(active, key=lambda pid: (recent[pid], activity[pid]), reverse=True)[: self.k]
