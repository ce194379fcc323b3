"""What analyze and compare share: the one-line error, JSON on stdout, and the HTML page written to a file."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ERROR_STATUS = 2


def fail(command: str, message: str) -> int:
    """Print the one-line error of *command* and give the exit status."""
    print(f"schedwatch {command}: {message}", file=sys.stderr)
    return ERROR_STATUS


def print_json(document: dict[str, Any]) -> None:
    """*document* on stdout, indented."""
    json.dump(document, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


def write_page(path: Path, page: str) -> str | None:
    """Write the HTML *page* to *path*; the error line when it cannot be written, else None."""
    try:
        path.write_text(page, encoding="utf-8")
    except OSError as error:
        return f"{path}: cannot write the HTML report ({error.strerror or error})"
    print(f"wrote {path}", file=sys.stderr)
    return None


def to_stdout(draw: Callable[[], None]) -> int:
    """Run *draw* (which prints the report); a reader that stops early (`| head`) is not an error. Exit status 0."""
    try:
        draw()
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
