"""A diagnosis (or a comparison) drawn for people: terminal tree, JSON contract, HTML page."""
