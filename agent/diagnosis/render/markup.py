"""Text as the page's markup holds it: every name escaped, its invisible characters shown (one owner for the page
and its charts)."""

from __future__ import annotations

import re
from html import escape

from agent.identity.labels import visible


def shown(value: object) -> str:
    """Text as HTML that shows it: markup escaped, invisible characters (an ESC, a bidi override) as escapes."""
    return escape(visible(str(value)), quote=True)


_CODE_SPAN = re.compile(r"`([^`]+)`")


def prose(value: object) -> str:
    """A sentence of the reports as HTML: :func:`shown`, with what it quotes in backticks (a command, a file) as code,
    as a terminal shows the backticks themselves."""
    return _CODE_SPAN.sub(r"<code>\1</code>", shown(value))
