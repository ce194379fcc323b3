"""Key presses on the terminal, read one at a time without echo while `schedwatch top` runs."""

from __future__ import annotations

import os
import select
import termios
import tty
from types import TracebackType

QUIT = frozenset({"q", "Q", "\x03"})


class Keys:
    """The terminal on *fd* in cbreak mode for the block's length; wait() returns a key or None after a timeout."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._saved: list[int | list[bytes | int]] | None = None

    def __enter__(self) -> Keys:
        self._saved = termios.tcgetattr(self._fd)
        tty.setcbreak(self._fd)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._saved is not None:
            termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)

    def wait(self, seconds: float) -> str | None:
        """The next key pressed within *seconds*, or None."""
        ready, _, _ = select.select([self._fd], [], [], max(seconds, 0.0))
        if not ready:
            return None
        data = os.read(self._fd, 1)
        return data.decode("latin-1") if data else "q"  # end of input: nothing more will come
