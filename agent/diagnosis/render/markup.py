"""Text as the page's markup holds it: every name escaped, its invisible characters shown (one owner for the page
and its charts)."""

from __future__ import annotations

from html import escape

from agent.identity.labels import visible


def shown(value: object) -> str:
    """Text as HTML that shows it: markup escaped, invisible characters (an ESC, a bidi override) as escapes."""
    return escape(visible(str(value)), quote=True)
