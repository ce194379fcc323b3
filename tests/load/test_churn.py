"""Cgroup churn, short: 2 rounds of 200 cgroups made, yielded in, removed (`make soak` runs an hour of 1,000)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.load.churn import Churn
from tests.support.agent import AgentProcess, require_root
from tests.support.workloads import CgroupSandbox

GRACE_SECONDS = 3.0
ROUNDS, CGROUPS = 2, 200  # the second round re-uses what the first left: rounds past it repeat (soak)


@pytest.fixture(scope="module")
def churn_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentProcess]:
    require_root()
    work = tmp_path_factory.mktemp("churn")
    agent = AgentProcess(work / "agent.log", "--series-grace", str(GRACE_SECONDS), "--state-dir", str(work))
    agent.wait_ready()
    yield agent
    assert agent.stop() == 0, agent.log()


def test_churned_cgroups_lose_no_yield_and_leave_nothing_behind(
    churn_agent: AgentProcess, cgroups: CgroupSandbox, yielder: Path
) -> None:
    churn = Churn(churn_agent, cgroups, yielder, CGROUPS, GRACE_SECONDS)
    churn.sample("baseline", 0)
    for _ in range(ROUNDS):
        result = churn.run_round()
        assert result.lost_nothing and result.removed_checked, result.problems()
        # Exact totals as well as exact per cgroup: 200 cgroups yielding 1,000 .. 1,199 times.
        expected = sum(range(1_000, 1_000 + CGROUPS))
        assert (result.yields_expected, result.yields_seen_live, result.yields_seen_removed) == (expected,) * 3
    assert not churn.scrape_failures, churn.scrape_failures
    settled = [sample for sample in churn.samples if sample.phase == "expired"]
    assert [sample.series_ours for sample in settled] == [0] * ROUNDS
    # Memory comes back, grossly: after the last round under twice what the agent held before the first. The agent's
    # first standing evaluation over a crowd of 200 flagged workloads raises the heap's high-water mark once, in
    # whichever round it lands (CI: 79 -> 101.7 MB in round 2, then 100.7; another run 81, 82.5 -> 97.0 in round 3);
    # which round depends on timing, so a 10 % bound against earlier rounds failed by chance. The trend, 10 % over
    # an hour of 1,000 cgroups, is `make soak`'s (tests/load/soak.py); here a leak of memory per churned cgroup on
    # the scale of the agent's own size still fails.
    (baseline,) = [sample for sample in churn.samples if sample.phase == "baseline"]
    assert settled[-1].rss_kb <= 2 * baseline.rss_kb, [baseline.rss_kb] + [sample.rss_kb for sample in settled]
