"""Assertions that must hold of any agent at any time, whatever fault it is going through."""

from __future__ import annotations

import json
from collections.abc import Iterable

from prometheus_client.parser import text_string_to_metric_families

from tests.support.scrape import Sample, Scrape

# Per-process series belong to a pid, which the kernel reuses: a new process under an old pid starts from zero.
PER_PROCESS_PREFIX = "schedwatch_process_"


def counter_samples(scrape: Scrape) -> dict[Sample, float]:
    """Every sample that must never decrease: counters, and the buckets, counts and sums of histograms."""
    found: dict[Sample, float] = {}
    for family in text_string_to_metric_families(scrape.text):
        if family.type not in ("counter", "histogram"):
            continue
        for sample in family.samples:
            if sample.name.endswith("_created") or sample.name.startswith(PER_PROCESS_PREFIX):
                continue
            found[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return found


def assert_counters_monotonic(scrapes: Iterable[Scrape]) -> int:
    """Between each pair of consecutive scrapes, no counter series present in both went down.

    Returns how many (series, pair) comparisons were made, so that a caller can check it compared something.
    """
    compared = 0
    previous: dict[Sample, float] | None = None
    for index, scrape in enumerate(scrapes):
        current = counter_samples(scrape)
        if previous is not None:
            for key, before in previous.items():
                after = current.get(key)
                if after is None:
                    continue
                compared += 1
                name, labels = key
                assert after >= before, f"scrape {index}: {name}{dict(labels)} went from {before} to {after}"
        previous = current
    return compared


def complaints(log_text: str, after_event: str = "listening") -> list[str]:
    """Lines of an agent's JSON log, after its *after_event* line, that are warnings, errors or not JSON at all
    (a traceback, or a library writing to stderr)."""
    lines = log_text.splitlines()
    start = next((i for i, line in enumerate(lines) if f'"event": "{after_event}"' in line), None)
    assert start is not None, f"the agent never logged {after_event!r}:\n{log_text}"
    found = []
    for line in lines[start + 1 :]:
        try:
            record = json.loads(line)
        except ValueError:
            found.append(line)
            continue
        if not isinstance(record, dict) or record.get("level") not in ("debug", "info"):
            found.append(line)
    return found
