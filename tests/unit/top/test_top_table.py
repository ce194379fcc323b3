"""schedwatch top's rows from two recorded scrapes of a real agent (tests/unit/fixtures/metrics/README.md): the
yielder made exactly 400,000 sched_yield calls between them, 2 s apart; the spinner ran under a 0.5-CPU quota."""

from __future__ import annotations

import math

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent.diagnosis.facts import Workload
from agent.identity.filter import Filter
from agent.series.reading import Reading, read_families
from agent.top.screen import plain
from agent.top.table import BY_KEY, BY_NAME, Row, cells, quantile, rows, sorted_rows
from tests.unit.locations import UNIT_FIXTURES

FIXTURES = UNIT_FIXTURES / "metrics"
YIELD = Workload(cgroup="/schedwatch-test-16764-9699bd/yield-d20f46")
QUOTA = Workload(cgroup="/schedwatch-test-16764-9699bd/quota-e202d0")


def read(name: str, at: float) -> Reading:
    return read_families(text_string_to_metric_families((FIXTURES / name).read_text()), at)


@pytest.fixture(scope="module")
def table() -> dict[Workload, Row]:
    return {item.ref: item for item in rows(read("agent-before.txt", 0.0), read("agent-after.txt", 2.0))}


def test_the_yielder_row_shows_its_400000_calls_over_2_seconds(table: dict[Workload, Row]) -> None:
    row = table[YIELD]
    assert row.yields_per_second == 200_000.0
    assert row.cpu_cores == pytest.approx(0.204524 / 2.0)
    assert row.system_share == 1.0  # all of its CPU was system time (user 0.0)
    assert row.limit_cores == 2.0 and row.threads == 1
    assert row.futex_per_second == 1.0  # 2 FUTEX_WAIT calls (the joins) in 2 s
    assert row.waiting_cores == pytest.approx(0.557009495 / 2.0)
    # 176 waits; the 99th percentile (rank 174.24) lies in the (5 ms, 10 ms] bucket, 24.24 of its 25 waits in.
    assert row.runqueue_p99_seconds == pytest.approx(0.005 + 0.005 * 24.24 / 25)
    assert row.throttled_cores is None  # no cpu.stat throttling series for it: unknown, not 0


def test_the_quota_row_shows_its_throttling(table: dict[Workload, Row]) -> None:
    row = table[QUOTA]
    assert row.throttled_cores == pytest.approx((2.671618608 - 0.423356002) / 2.0)
    assert row.cpu_cores == pytest.approx((2.218371 - 1.008831) / 2.0)
    assert row.limit_cores == 0.5 and row.threads == 3
    assert row.yields_per_second == 0.0  # the series is there and did not move: 0, not unknown
    assert row.futex_per_second == 0.0


def test_series_not_exported_show_a_dash_never_zero(table: dict[Workload, Row]) -> None:
    row = table[YIELD]
    assert row.waiting_by_holder is None and row.blocked_by_state is None and row.finding is None
    shown = dict(zip((column.name for column in BY_NAME.values()), cells(row), strict=True))
    assert shown["wait-self"] == shown["wait-other"] == shown["wait-kernel"] == shown["blocked"] == "-"
    assert shown["yields"] == "200000" and shown["cpu"] == "0.10/2" and shown["p99"] == "9.85ms"
    assert shown["throttled"] == "-" and shown["finding"] == "-"


def test_sorting_by_a_column_orders_largest_first_and_unknown_last(table: dict[Workload, Row]) -> None:
    by_yields = [item.ref for item in sorted_rows(table.values(), BY_KEY["y"])]
    assert by_yields[0] == YIELD
    by_throttled = sorted_rows(table.values(), BY_KEY["t"])
    assert by_throttled[0].ref == QUOTA
    known = [item for item in by_throttled if item.throttled_cores is not None]
    assert by_throttled[: len(known)] == known  # every "-" after every number
    assert [item.name for item in sorted_rows(table.values(), BY_NAME["name"])] == sorted(
        item.name for item in table.values()
    )


def test_filters_are_diagnoses(table: dict[Workload, Row]) -> None:
    only = rows(
        read("agent-before.txt", 0.0), read("agent-after.txt", 2.0), Filter(cgroup="/schedwatch-test-16764-9699bd")
    )
    assert {item.ref for item in only} == {YIELD, QUOTA}


def test_the_plain_table_has_a_header_and_a_line_per_workload(table: dict[Workload, Row]) -> None:
    text = plain(sorted_rows(table.values(), BY_KEY["y"]), BY_KEY["y"], "t").splitlines()
    assert text[0] == "t  sorted by yields"
    assert text[1].split()[:3] == ["WORKLOAD", "CPU", "SYS%"]
    assert text[2].startswith(YIELD.cgroup) and len(text) == 2 + len(table)


W = 'cgroup="/w",container="",container_id="",namespace="",pod=""'
BUDGET = """schedwatch_build_info{{version="0.1.0",kernel_release="6.18"}} 1
# TYPE schedwatch_runqueue_wait_by_holder_seconds_total counter
schedwatch_runqueue_wait_by_holder_seconds_total{{{W},holder="self"}} {self}
schedwatch_runqueue_wait_by_holder_seconds_total{{{W},holder="other"}} {other}
schedwatch_runqueue_wait_by_holder_seconds_total{{{W},holder="kernel"}} 0.0
# TYPE schedwatch_blocked_seconds_total counter
schedwatch_blocked_seconds_total{{{W},state="uninterruptible"}} {d}
# TYPE schedwatch_syscalls counter
schedwatch_syscalls_total{{{W},family="yield"}} {y}
schedwatch_syscalls_total{{{W},family="futex"}} 1.0
schedwatch_syscalls_total{{{W},family="clock"}} 0.5
# TYPE schedwatch_finding gauge
schedwatch_finding{{cause="{cause}",mechanism="m",{W}}} 1.0
"""


def test_the_budget_series_fill_their_columns_when_they_exist() -> None:
    """The agreed budget series' names and labels (HELPERS.md), in the text format; values chosen for the test."""

    def at(when: float, **values: float | str) -> Reading:
        return read_families(text_string_to_metric_families(BUDGET.format(W=W, **values)), when)

    (row,) = rows(
        at(10.0, self=1.0, other=2.0, d=0.0, y=0.0, cause="a"),
        at(14.0, self=3.0, other=10.0, d=4.0, y=3.0, cause="yield_spin"),
    )
    assert row.waiting_by_holder == {"self": 0.5, "other": 2.0, "kernel": 0.0}
    assert row.blocked_by_state == {"uninterruptible": 1.0}
    assert row.families == (("yield", 1.0),)  # futex and clock did not move
    assert row.finding == "yield_spin"
    assert cells(row)[4:7] == ["0.50", "2.00", "0.00"]


def test_the_p99_of_waits_in_the_last_bucket_is_its_lower_bound() -> None:
    assert quantile(0.99, {}, {0.001: 0.0, math.inf: 5.0}) == 0.001
    assert quantile(0.99, {0.001: 2.0, math.inf: 2.0}, {0.001: 2.0, math.inf: 2.0}) is None  # no waits between


def test_a_narrow_terminal_keeps_the_numbers_and_the_end_of_the_names(table: dict[Workload, Row]) -> None:
    from rich.console import Console

    from agent.top.screen import rich_table

    console = Console(width=130, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(rich_table(sorted_rows(table.values(), BY_KEY["y"]), BY_KEY["y"], "t", 130))
    lines = console.export_text().splitlines()
    assert max(len(line) for line in lines) <= 130
    (line,) = [line for line in lines if "yield-d20f46" in line]
    assert line.split()[0].startswith("…") and line.split()[0].endswith("/yield-d20f46")
    assert "200000" in line.split() and "9.85ms" in line.split()
