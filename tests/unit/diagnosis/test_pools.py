"""The pool table owns every thread variable: what a fix or `verify` may set is what the environment reader reads,
and every library the maps reader recognises has a row with its variables."""

from __future__ import annotations

import itertools

import pytest

from agent.diagnosis import allocators, pools
from agent.diagnosis.facts import LibraryView
from agent.diagnosis.inputs.processes.environment import ALLOWED
from agent.diagnosis.rules.fixes import pool_fix, pool_variables
from agent.verification.fix import THREAD_VARIABLES
from tests.unit.diagnosis.report_samples import sick_workload


def library(implementation: str) -> LibraryView:
    row = pools.BY_IMPLEMENTATION[implementation]
    return LibraryView(api=row.api, implementation=implementation, version=None)


def test_every_variable_a_fix_may_name_is_allow_listed() -> None:
    named: set[str] = set(pool_variables(None))
    for count in range(1, 3):  # every library alone and every pair of libraries mapped together
        for implementations in itertools.combinations(pools.BY_IMPLEMENTATION, count):
            named |= set(pool_variables([library(name) for name in implementations]))
    assert named - set(ALLOWED) == set()
    assert set(THREAD_VARIABLES) - set(ALLOWED) == set()
    assert "BLIS_NUM_THREADS" in named  # the variable the old allow-list never read


def test_every_variable_a_finding_sets_is_allow_listed() -> None:
    for implementation in pools.BY_IMPLEMENTATION:
        fix = pool_fix(sick_workload(), 4.0, 2, (library(implementation),), spin=True)
        assert set(fix.variables) <= set(ALLOWED), implementation
        assert fix.threads_per_process == 2


@pytest.mark.parametrize(
    "row", [row for row in pools.IMPLEMENTATIONS if row.prefixes], ids=lambda row: row.implementation
)
def test_every_mapped_library_has_a_row_its_file_names_find(row: pools.PoolImplementation) -> None:
    for prefix in row.prefixes:
        assert pools.implementation_of(f"{prefix}.so.1") is row
    # tbb sizes its pool by the CPUs it may use; every other mapped pool has a variable that caps it.
    assert row.variables or row.implementation == "tbb"


def test_the_table_has_one_row_per_implementation_and_the_allow_list_only_its_variables() -> None:
    assert len(pools.BY_IMPLEMENTATION) == len(pools.IMPLEMENTATIONS)
    every = {name for row in pools.IMPLEMENTATIONS for name in (*row.variables, *row.also_reads, *row.tuning)}
    assert set(ALLOWED) == every | set(allocators.ALLOCATOR_VARIABLES)
    assert len(ALLOWED) == len(set(ALLOWED))
    assert pools.reading("OMP_WAIT_POLICY") == {"gnu", "llvm", "intel"}
