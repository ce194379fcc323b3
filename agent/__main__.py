"""``python -m agent`` is the ``schedwatch`` command."""

from agent.cli import main

raise SystemExit(main())
