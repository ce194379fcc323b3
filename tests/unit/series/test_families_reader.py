"""The standing evaluation's reader of successive scrapes (agent/series/reading.py's FamiliesReader): each reading is
what read_families makes of the same families, and a workload whose blocks of rows came back as the same objects,
and whose other rows read the same, keeps its last Totals object (read from the agent's recorded scrape)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from agent import metrics
from agent.exposition.family import Family, RowFamily
from agent.series.reading import FamiliesReader, Reading, read_families
from tests.unit.exposition.test_exposition import RECORDED, as_rows

WIDTH = len(metrics.WORKLOAD_LABELS)
YIELDS = metrics.SCHED_YIELD_CALLS.name


def scrape() -> list[RowFamily]:
    """The recorded scrape's families, each workload's rows of a family in one block of its own (as BlockCache makes
    them), but the cgroup CPU family's, filled row by row (as the pressure and memory collectors do)."""
    families = as_rows(text_string_to_metric_families(RECORDED.read_text()))
    for family in families:
        if family.labelnames[:WIDTH] != metrics.WORKLOAD_LABELS or family.name == metrics.CPU_USAGE_SECONDS.name:
            continue
        by_workload: dict[tuple[str, ...], list[object]] = {}
        for row in family.rows:
            by_workload.setdefault(row[0][:WIDTH], []).append(row)
        family.blocks = [tuple(rows) for rows in by_workload.values()]
    return families


def family_named(families: list[RowFamily], name: str) -> RowFamily:
    return next(family for family in families if family.name == name)


def same_totals(reading: Reading, families: list[RowFamily]) -> bool:
    return reading == read_families(families, reading.at)


def test_unchanged_workloads_keep_their_totals_and_every_reading_is_read_families() -> None:
    reader = FamiliesReader()
    first_families = scrape()
    first = reader.read(first_families, 1.0)
    assert same_totals(first, first_families)
    yields = family_named(first_families, YIELDS)
    assert len(yields.blocks) >= 3, "the fixture has several workloads yielding"

    # The next scrape: every block the same object, but one workload's yields grew (a new block).
    grown = yields.blocks[0][0]
    second_families = list(first_families)
    second_yields = Family(yields.name, yields.documentation, yields.type, yields.labelnames)
    second_yields.blocks = [((grown[0], grown[1] + 5),), *yields.blocks[1:]]
    second_families[first_families.index(yields)] = second_yields
    second = reader.read(second_families, 2.0)
    assert same_totals(second, second_families)
    grown_ref = next(ref for ref in second.workloads if ref.labels() == grown[0][:WIDTH])
    before = first.count(grown_ref, metrics.SCHED_YIELD_CALLS)
    assert before is not None, "the grown workload's yields series is there"
    assert second.count(grown_ref, metrics.SCHED_YIELD_CALLS) == before + 5
    kept = [ref for ref in second.workloads if second.workloads[ref] is first.workloads.get(ref)]
    assert grown_ref not in kept and len(kept) == len(second.workloads) - 1

    # A workload's block gone (its series expired), and a row filled row by row that moved: both read again.
    third_families = list(second_families)
    third_yields = Family(yields.name, yields.documentation, yields.type, yields.labelnames)
    third_yields.blocks = list(second_yields.blocks[:-1])
    third_families[second_families.index(second_yields)] = third_yields
    usage = family_named(first_families, metrics.CPU_USAGE_SECONDS.name)
    moved = usage.rows[0]
    third_usage = Family(usage.name, usage.documentation, usage.type, usage.labelnames)
    third_usage.rows = [(moved[0], moved[1] + 1.0), *usage.rows[1:]]
    third_families[first_families.index(usage)] = third_usage
    third = reader.read(third_families, 3.0)
    assert same_totals(third, third_families)
    gone = yields.blocks[-1][0][0][:WIDTH]
    for labels in (gone, moved[0][:WIDTH]):
        ref = next(ref for ref in third.workloads if ref.labels() == labels)
        assert third.workloads[ref] is not second.workloads[ref]
