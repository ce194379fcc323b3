"""Structured logging: JSON lines, or a console renderer when stderr is a terminal."""

from __future__ import annotations

import logging
import sys

# structlog loads rich (and attrs) for pretty tracebacks if it can: anonymous memory of the agent's that a JSON
# log line never uses. It is imported while `import rich` fails; the reports import rich later, as usual, and
# structlog's console renderer then formats tracebacks plainly.
_RICH_HIDDEN = "structlog" not in sys.modules and "rich" not in sys.modules
if _RICH_HIDDEN:
    sys.modules["rich"] = None  # type: ignore[assignment]
try:
    import structlog
finally:
    if _RICH_HIDDEN:
        del sys.modules["rich"]

LEVELS = ("debug", "info", "warning", "error")
FORMATS = ("auto", "json", "console")


class _CurrentStderr:
    """Whatever sys.stderr is when a line is written (it may be replaced after configure(), e.g. by a test)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def configure(level: str = "info", fmt: str = "auto") -> None:
    """Set up structlog once for the process; logs go to stderr."""
    console = fmt == "console" or (fmt == "auto" and sys.stderr.isatty())
    renderer: structlog.types.Processor = (
        structlog.dev.ConsoleRenderer() if console else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=True,
    )


def get_logger(name: str) -> structlog.typing.FilteringBoundLogger:
    """A logger that tags each line with the component's name."""
    # Lazy: modules create their loggers at import, before configure() runs.
    logger: structlog.typing.FilteringBoundLogger = structlog.get_logger(component=name)
    return logger
