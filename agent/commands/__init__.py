"""Subcommands of `schedwatch` that live in modules of their own."""
