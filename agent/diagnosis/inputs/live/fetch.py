"""One HTTP GET with a deadline on the whole exchange, for diagnose's --from sources.

urllib's timeout bounds each socket operation, not the request: a server that trickles its answer a byte at a
time keeps a read going for ever. The GET runs in a daemon thread that is abandoned at the deadline (diagnose is a
command that exits soon after; the thread ends with the process or at its next socket timeout).
"""

from __future__ import annotations

import threading
import urllib.request


class DeadlinePassed(TimeoutError):
    """No whole answer arrived in time."""


def get(url: str, seconds: float, max_bytes: int, headers: dict[str, str] | None = None) -> bytes:
    """The body of a GET of *url* (at most *max_bytes*); DeadlinePassed after *seconds*, urllib's errors otherwise."""
    outcome: list[bytes | BaseException] = []

    def exchange() -> None:
        try:
            request = urllib.request.Request(url, headers=headers or {})
            with urllib.request.urlopen(request, timeout=seconds) as response:
                outcome.append(response.read(max_bytes))
        except BaseException as error:  # handed to the caller's thread
            outcome.append(error)

    worker = threading.Thread(target=exchange, name="diagnose-fetch", daemon=True)
    worker.start()
    worker.join(seconds)
    if not outcome:
        raise DeadlinePassed(f"no whole answer within {seconds:g} s")
    result = outcome[0]
    if isinstance(result, BaseException):
        raise result
    return result
