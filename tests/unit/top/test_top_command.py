"""`schedwatch top`'s flags: a bad value is one usage line, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import pytest

from agent.series.reading import Reading
from tests.support.agent import REPO
from tests.unit.locations import UNIT_FIXTURES


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        (("--interval", "0.1"), "argument --interval: 0.1 s is out of range: give 0.5 to 60 seconds"),
        (("--interval", "soon"), "argument --interval: 'soon' is not a number of seconds"),
        (("--sort", "colour"), "argument --sort: invalid choice: 'colour'"),
        (("--listen", ":1"), "top serves nothing; it is `schedwatch run`'s flag"),
    ],
)
def test_bad_flags_are_one_usage_line(arguments: tuple[str, ...], says: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "agent", "top", *arguments], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert says in result.stderr.splitlines()[-1], result.stderr


def test_the_collectors_loaded_here_are_judged_so_the_finding_column_fills() -> None:
    """Two recorded /metrics of a real agent, 2 s apart, read as top reads the collectors it loads itself (they
    carry no schedwatch_finding: no agent judges them): unjudged, the yield storm's FINDING is empty ("-", the
    defect); judged at each reading, as top now does, it is the pool's cause, as the agent's rules name it."""
    from prometheus_client.parser import text_string_to_metric_families

    from agent.commands.top import judging
    from agent.diagnosis.inputs.live.sources import CollectedSource
    from agent.diagnosis.standing import StandingFindings
    from agent.top.table import rows

    fixtures = UNIT_FIXTURES / "metrics"
    texts = [(fixtures / name).read_text() for name in ("agent-before.txt", "agent-after.txt")]
    storm = "/schedwatch-test-16764-9699bd/yield-d20f46"  # the recording's yield storm (test_diagnose_live.YIELD)

    def source() -> CollectedSource:
        collections = iter([list(text_string_to_metric_families(text)) for text in texts])
        clock = iter((100.0, 100.0, 102.0, 102.0))
        return CollectedSource(lambda: next(collections), clock=lambda: next(clock))

    def finding(read: Callable[[], Reading]) -> str | None:
        before, after = read(), read()
        (row,) = [row for row in rows(before, after) if row.ref.cgroup == storm]
        return row.finding

    assert finding(source().read) is None
    judged = source().extended(judging(StandingFindings(node_cpus=2, every=0.0)))
    assert finding(judged.read) == "thread-pool-oversubscription"
