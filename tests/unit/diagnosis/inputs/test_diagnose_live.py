"""Live diagnosis without the kernel: recorded /metrics of a real agent -> readings -> windows -> Facts; filters;
the sources' one-line errors against real local HTTP servers; --duration bounds."""

from __future__ import annotations

import http.server
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from agent import cli, metrics
from agent.diagnosis.facts import Workload
from agent.diagnosis.findings import Cause, Mechanism
from agent.diagnosis.inputs.live.fleet import PrometheusSource
from agent.diagnosis.inputs.live.gather import NothingMatches, chosen, facts_from_window
from agent.diagnosis.inputs.live.ranking import FLAG_SCORE, score
from agent.diagnosis.inputs.live.sources import AgentSource, SourceError
from agent.diagnosis.inputs.live.window import Window, cpus_allowed, workload_view
from agent.diagnosis.rules import diagnose
from agent.identity.filter import Filter, cgroup_of, filter_for_pid
from agent.identity.members import in_workload
from agent.machine.cgroups.layout import CgroupLayout
from agent.machine.procfs import ProcFS
from agent.series.reading import NotSchedwatch, read_families
from tests.support.agent import free_port
from tests.unit.locations import UNIT_FIXTURES

FIXTURES = UNIT_FIXTURES / "metrics"
BEFORE = (FIXTURES / "agent-before.txt").read_text()
AFTER = (FIXTURES / "agent-after.txt").read_text()
YIELD = Workload(cgroup="/schedwatch-test-16764-9699bd/yield-d20f46")
QUOTA = Workload(cgroup="/schedwatch-test-16764-9699bd/quota-e202d0")
CONVOY = Workload(cgroup="/schedwatch-test-16549-01a860/lock-convoy-038ab5")


def window(before: str = BEFORE, after: str = AFTER, seconds: float = 2.0) -> Window:
    return Window(
        read_families(text_string_to_metric_families(before), 100.0),
        read_families(text_string_to_metric_families(after), 100.0 + seconds),
    )


def test_a_workload_made_within_the_window_counts_from_zero() -> None:
    view = workload_view(window(), YIELD, node_cpus=2)
    assert view.sched_yield_calls == 400_000  # the yielder's exact count, all of it inside the window
    assert view.seconds == 2.0
    assert view.threads == 1
    assert view.cpu_limit_cores is None  # 2.0 = every CPU of the node: no limit
    assert view.cpus_allowed == 2.0
    assert view.runqueue_wait_seconds == pytest.approx(0.557009495)
    assert view.cpu_used_cores == pytest.approx(0.204524 / 2.0)
    assert view.system_share == 1.0


def test_quota_counts_are_the_differences_of_the_two_scrapes() -> None:
    view = workload_view(window(), QUOTA, node_cpus=2)
    assert view.sched_yield_calls == 0
    assert view.periods == 44 - 20
    assert view.throttled_periods == 41 - 19
    assert view.runqueue_wait_seconds == pytest.approx(6.493878509 - 2.924843002)
    assert view.cpu_used_cores == pytest.approx((2.218371 - 1.008831) / 2.0)
    assert view.cpu_limit_cores == 0.5
    assert view.cpus_allowed == 0.5
    assert view.threads == 3


def test_a_collector_that_is_not_running_gives_unknown_not_zero() -> None:
    off = 'schedwatch_source_up{source="syscalls"} 1.0'
    assert off in BEFORE and off in AFTER
    view = workload_view(window(BEFORE.replace(off, ""), AFTER.replace(off, "")), YIELD, node_cpus=2)
    assert view.futex_calls is None
    # the yield series is there, so it still counts; a workload without one is unknown, not 0
    assert view.sched_yield_calls == 400_000
    quiet = Workload(cgroup="/no-such-cgroup")
    assert workload_view(window(BEFORE.replace(off, ""), AFTER.replace(off, "")), quiet, 2).sched_yield_calls is None


def test_a_counter_that_went_backwards_is_unknown() -> None:
    restarted = workload_view(window(AFTER, BEFORE), QUOTA, node_cpus=2)
    assert restarted.periods is None
    assert restarted.runqueue_wait_seconds is None


def test_text_without_build_info_is_not_an_agent() -> None:
    with pytest.raises(NotSchedwatch):
        read_families(text_string_to_metric_families("node_load1 0.5\n"), 0.0)


def test_cpus_allowed_is_the_least_of_limit_affinity_and_node() -> None:
    assert cpus_allowed(None, (), 2) == 2.0
    assert cpus_allowed(0.5, (0, 1), 2) == 0.5
    assert cpus_allowed(None, (1,), 2) == 1.0
    assert cpus_allowed(None, (), None) is None


def test_the_yielding_and_the_throttled_workloads_are_flagged_and_diagnosed() -> None:
    facts = facts_from_window(window(), Filter(), "fixture", False, ProcFS(), None, None, 0.0)
    # Highest score first. Besides the two recorded workloads, the machine's own: another test's lock convoy, the
    # root, and a cpu-hogs cgroup with no CPU count known (no cgroup_cpu series) that cannot be judged per CPU.
    assert [view.ref for view in chosen(facts.workloads, Filter())] == [YIELD, QUOTA, CONVOY, Workload(cgroup="/")]
    assert all(score(view) >= FLAG_SCORE for view in chosen(facts.workloads, Filter()))
    diagnosis = diagnose(facts)
    assert {(finding.workload, finding.cause, finding.mechanism) for finding in diagnosis.findings} == {
        (YIELD, Cause.THREAD_POOL_OVERSUBSCRIPTION, Mechanism.YIELD_STORM),
        (QUOTA, Cause.CPU_THROTTLING, Mechanism.QUOTA),
        (CONVOY, Cause.FUTEX_CONTENTION, Mechanism.LOCK_CONVOY),
    }
    assert any("not read" in note for note in facts.notes)  # not local: the report says what it could not read


def test_a_filter_keeps_only_its_workload_and_one_matching_nothing_is_an_error() -> None:
    facts = facts_from_window(window(), Filter(cgroup=QUOTA.cgroup), "fixture", False, ProcFS(), None, None, 0.0)
    assert [view.ref for view in facts.workloads] == [QUOTA]
    with pytest.raises(NothingMatches, match="--pod nope"):
        facts_from_window(window(), Filter(pod="nope"), "fixture", False, ProcFS(), None, None, 0.0)


def test_filters_match_names_id_prefixes_and_cgroup_subtrees() -> None:
    ref = Workload(container_id="ab" * 32, container="worker", pod="pipeline-0", namespace="ml")
    assert Filter(namespace="ml", pod="pipeline-0").matches(ref)
    assert Filter(container="worker").matches(ref)
    assert Filter(container="ab" * 6).matches(ref)
    assert not Filter(container="ab" * 3).matches(ref)  # too short to name a container
    assert not Filter(namespace="web").matches(ref)
    assert Filter(cgroup="/schedwatch-test-16764-9699bd").matches(QUOTA)
    assert not Filter(cgroup="/schedwatch-test-1676").matches(QUOTA)
    docker = "/system.slice/docker-" + "cd" * 32 + ".scope"
    assert in_workload(docker, Workload(container_id="cd" * 32))
    # a directory merely named like a container is exported as the plain cgroup it is: its processes are that one's
    assert in_workload(docker, Workload(cgroup=docker))
    assert not in_workload(docker, Workload(container_id="ab" * 32))


def test_a_pid_is_turned_into_its_cgroup() -> None:
    procfs = ProcFS()
    mine = cgroup_of(procfs, os.getpid())
    wanted = filter_for_pid(procfs, Filter(pid=os.getpid()))
    assert wanted.pid == os.getpid()
    assert wanted.cgroup == mine or wanted.container


def test_a_pid_on_a_v1_host_is_placed_by_its_systemd_path_not_the_cgroup2_line(tmp_path: Path) -> None:
    """A v1-only host still lists the unmounted cgroup2 hierarchy ("0::/"): --pid names the process's systemd path."""
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "cgroup").write_text(
        "2:cpu,cpuacct:/system.slice\n1:name=systemd:/system.slice/web.service\n0::/\n"
    )
    order = CgroupLayout(None, {"name=systemd": Path("/sys/fs/cgroup/systemd"), "cpu": Path("/c")}).placing_order
    assert cgroup_of(ProcFS(tmp_path), 4242, order) == "/system.slice/web.service"
    assert cgroup_of(ProcFS(tmp_path), 4242, ("",)) == "/"


class _Serve(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def served() -> Iterator[tuple[str, type[_Serve]]]:
    handler = type("Handler", (_Serve,), {})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


def test_an_agent_url_is_read_and_parsed(served: tuple[str, type[_Serve]]) -> None:
    url, handler = served
    handler.body = AFTER.encode()
    source = AgentSource(url)
    assert source.url == f"{url}/metrics"
    assert source.local
    assert source.read().workloads[YIELD].count(metrics.SCHED_YIELD_CALLS) == 400_000


def test_a_metrics_page_that_is_not_schedwatch_says_so(served: tuple[str, type[_Serve]]) -> None:
    url, handler = served
    handler.body = b"# TYPE node_load1 gauge\nnode_load1 0.5\n"
    with pytest.raises(SourceError, match="is not a schedwatch agent's /metrics") as error:
        AgentSource(url).read()
    assert "\n" not in str(error.value)


class _Trickle(_Serve):
    """Answers 200, then one byte every 0.1 s for 10 s: each read is quick, the whole answer never comes."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.end_headers()
        for _ in range(100):
            try:
                self.wfile.write(b"#")
                self.wfile.flush()
            except OSError:
                return
            time.sleep(0.1)


@pytest.fixture
def trickling() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Trickle)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_trickling_agent_is_given_up_at_the_deadline(trickling: str) -> None:
    started = time.monotonic()
    with pytest.raises(SourceError, match=r"sent no whole /metrics within 1 s: check that the agent") as error:
        AgentSource(trickling, timeout=1.0).read()
    assert time.monotonic() - started < 5.0  # the per-read timeout alone would wait out the 10 s trickle
    assert "\n" not in str(error.value)


def test_a_trickling_prometheus_is_given_up_at_the_deadline(trickling: str) -> None:
    started = time.monotonic()
    with pytest.raises(SourceError, match=r"did not answer a query within 1 s: ask for a shorter --duration"):
        PrometheusSource(f"prometheus+{trickling}", timeout=1.0).query("up")
    assert time.monotonic() - started < 5.0


def test_an_unreachable_agent_says_so_in_one_line() -> None:
    with pytest.raises(SourceError, match=r"cannot reach http://127\.0\.0\.1:.*is the agent running there") as error:
        AgentSource(f"http://127.0.0.1:{free_port()}").read()
    assert "\n" not in str(error.value)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--duration", "0"], "0 s is out of range: give 1 to 600 seconds"),
        (["--duration", "601"], "601 s is out of range"),
        (["--duration", "ten"], "'ten' is not a whole number of seconds"),
        (["--pid", "-3"], "is not a process id: give its number (pgrep -f NAME finds it)"),
    ],
)
def test_bad_flags_are_one_line_errors(flags: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["diagnose", *flags])
    assert exited.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert message in error


def test_source_errors_exit_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["diagnose", "--from", f"http://127.0.0.1:{free_port()}", "--duration", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("schedwatch diagnose: cannot reach") and "\n" not in err
    assert cli.main(["diagnose", "--node", "n1"]) == 2
    assert "--node needs --from prometheus+http://" in capsys.readouterr().err
    assert cli.main(["diagnose", "--from", "ftp://x"]) == 2
    assert "give an agent as http://HOST:PORT" in capsys.readouterr().err


def test_the_v1_user_system_split_never_goes_backwards() -> None:
    from agent.machine.cgroups.cpu import CpuUsage, MonotonicSplit

    split = MonotonicSplit()
    assert split.adjust("a", CpuUsage(600, 400)) == CpuUsage(600, 400)
    assert split.adjust("a", CpuUsage(580, 520)) == CpuUsage(600, 500)  # user would have gone back
    assert split.adjust("a", CpuUsage(800, 450)) == CpuUsage(750, 500)  # system would have gone back
    assert split.adjust("a", CpuUsage(700, 500)) == CpuUsage(750, 500)  # an older reading: keep the last
    split.keep_only(set())
    assert split.adjust("a", CpuUsage(1, 1)) == CpuUsage(1, 1)


def test_standing_findings_judge_the_time_between_evaluations() -> None:
    from agent.diagnosis.standing import StandingFindings

    now = [100.0]
    standing = StandingFindings(node_cpus=2, clock=lambda: now[0], every=10.0)

    def rows(text: str) -> set[tuple[str, ...]]:
        """A scrape serving *text*: the findings it serves, then its families handed over and judged after it."""
        family = standing.family()
        standing.hand_over(text_string_to_metric_families(text))
        standing.evaluate_pending()
        assert family.name == "schedwatch_finding"
        assert all(sample.value == 1 for sample in family.samples)
        return {(s.labels["cause"], s.labels["mechanism"], s.labels["cgroup"]) for s in family.samples}

    assert rows(BEFORE) == set()  # one reading: nothing to judge yet
    now[0] = 105.0
    assert rows(AFTER) == set()  # too soon: the first reading is kept as the window's start
    now[0] = 112.0
    assert rows(AFTER) == set()  # judged after this scrape, off its path
    now[0] = 113.0
    judged = rows(AFTER)
    # The recorded scrapes were 2 s apart; judged over these 12 s the other test's lock convoy blocks its threads
    # too little of the time for the rule (over the 2 s it is a finding: see the test above).
    assert judged == {
        ("thread-pool-oversubscription", "yield-storm", YIELD.cgroup),
        ("cpu-throttling", "quota", QUOTA.cgroup),
    }
    now[0] = 115.0
    assert rows(BEFORE) == judged  # between evaluations the last findings stand
    now[0] = 130.0
    assert rows(AFTER) == judged  # the evaluation this scrape hands over shows at the next
    assert rows(AFTER) == set()  # nothing happened since the last evaluation: no finding


def test_a_container_named_within_the_window_keeps_its_earlier_counts() -> None:
    container_id = "ab" * 32
    by_id = f'container_id="{container_id}",container="",pod="",namespace="",cgroup=""'
    named = f'container_id="{container_id}",container="worker",pod="pipeline-0",namespace="ml",cgroup=""'
    head = 'schedwatch_build_info{version="0.1.0",kernel_release="x"} 1\nschedwatch_source_up{source="syscalls"} 1\n'
    before = head + f"schedwatch_sched_yield_calls_total{{{by_id}}} 5000000\n"
    after = head + f"schedwatch_sched_yield_calls_total{{{named}}} 5000300\n"
    ref = Workload(container_id, "worker", "pipeline-0", "ml")
    # the agent moved the series, history included, to the names: only 300 calls were made in the window
    assert workload_view(window(before, after), ref, node_cpus=2).sched_yield_calls == 300


def test_a_container_named_halfway_through_a_scrape_is_one_workload() -> None:
    container_id = "cd" * 32
    by_id = f'container_id="{container_id}",container="",pod="",namespace="",cgroup=""'
    named = f'container_id="{container_id}",container="etl",pod="",namespace="",cgroup=""'
    head = 'schedwatch_build_info{version="0.1.0",kernel_release="x"} 1\nschedwatch_source_up{source="syscalls"} 1\n'
    # the syscalls collector ran before the name arrived, cgroup_cpu after
    text = head + f"schedwatch_sched_yield_calls_total{{{by_id}}} 60001\nschedwatch_threads{{{named}}} 1\n"
    reading = read_families(text_string_to_metric_families(text), 0.0)
    ((ref, totals),) = reading.workloads.items()
    assert ref == Workload(container_id, "etl")
    assert totals.count(metrics.SCHED_YIELD_CALLS) == 60001 and totals.gauge(metrics.THREADS) == 1
    assert len(totals.counts) == len(totals.gauges) == 1


class _CannedPrometheus(PrometheusSource):
    """Answers each query by the metric it names: one node, two workloads, NaN where Prometheus had no number."""

    def __init__(self, answers: dict[str, list[tuple[dict[str, str], str]]]) -> None:
        super().__init__("prometheus+http://prometheus.invalid:9090")
        self.answers = answers

    def query(self, expr: str) -> list[dict[str, object]]:
        name = next((name for name in self.answers if name in expr), None)
        return [] if name is None else [{"metric": labels, "value": [1.0, v]} for labels, v in self.answers[name]]


def test_a_nan_from_prometheus_is_unknown_not_zero() -> None:
    node = {"instance": "node-a:17953"}
    nan_side, counted = {**node, "cgroup": "/nan"}, {**node, "cgroup": "/counted"}
    source = _CannedPrometheus(
        {
            "schedwatch_build_info": [(node, "1")],
            "schedwatch_source_up": [({**node, "source": "syscalls"}, "1")],
            "schedwatch_sched_yield_calls_total": [(nan_side, "NaN"), (counted, "600")],
            "schedwatch_futex_calls_total": [({**nan_side, "op": "wait"}, "NaN"), ({**counted, "op": "wait"}, "30")],
            "schedwatch_threads": [(nan_side, "NaN"), (counted, "4")],
        }
    )
    (node_window,) = source.node_windows(60)
    unknown = workload_view(node_window.window, Workload(cgroup="/nan"), None)
    assert (unknown.sched_yield_calls, unknown.futex_calls, unknown.threads) == (None, None, None)
    known = workload_view(node_window.window, Workload(cgroup="/counted"), None)
    assert (known.sched_yield_calls, known.futex_calls, known.threads) == (600.0, {"wait": 30.0}, 4)


def test_standing_findings_look_only_at_workloads_that_changed_and_find_what_every_view_finds() -> None:
    from agent.diagnosis.facts import Facts, NodeView
    from agent.diagnosis.inputs.live.ranking import CATCH_ALL, FLAG_SCORE, score
    from agent.diagnosis.inputs.live.window import Window, changed_workloads, workload_views
    from agent.diagnosis.rules import diagnose
    from agent.diagnosis.standing import StandingFindings
    from agent.series.reading import read_families

    before = read_families(text_string_to_metric_families(BEFORE), 100.0)
    after = read_families(text_string_to_metric_families(AFTER), 102.0)
    window = Window(before, after)
    changed = changed_workloads(window)
    assert len(changed) == len(after.workloads) == 5, "every recorded workload did something in the window"
    assert changed_workloads(Window(after, after)) == [], "a reading against itself: nothing changed"
    yields = next(line for line in AFTER.splitlines() if line.startswith("schedwatch_sched_yield_calls_total{"))
    more = yields.rsplit(" ", 1)[0] + f" {float(yields.rsplit(' ', 1)[1]) + 1e6}"
    one_busier = read_families(text_string_to_metric_families(AFTER.replace(yields, more)), 112.0)
    (busier,) = changed_workloads(Window(after, one_busier))
    assert busier.cgroup in yields, "only the workload whose count moved"
    node = NodeView(cpus=2)
    every = [v for v in workload_views(window, 2) if v.ref.cgroup not in CATCH_ALL and score(v, node) >= FLAG_SCORE]
    assert {view.ref for view in every} <= set(changed), "every flagged workload is one that changed"
    by_every = diagnose(Facts(node=node, workloads=tuple(every), sources=("test",))).findings
    assert by_every, "the recorded window has findings"

    now = [100.0]
    standing = StandingFindings(node_cpus=2, clock=lambda: now[0], every=1.0)
    standing.hand_over(text_string_to_metric_families(BEFORE))
    standing.evaluate_pending()
    now[0] = 102.0
    standing.hand_over(text_string_to_metric_families(AFTER))
    standing.evaluate_pending()
    served = {(s.labels["cause"], s.labels["mechanism"], s.labels["cgroup"]) for s in standing.family().samples}
    assert served == {(f.cause.value, f.mechanism.value, f.workload.cgroup) for f in by_every}
    # A workload gone since the evaluation (no threads gauge in this scrape) takes its findings with it.
    kept = by_every[0].workload.labels()
    alive = {(s.labels["cgroup"]) for s in standing.family({kept}).samples}
    assert alive == {kept[-1]} and standing.family(set()).samples == []


def test_a_containers_series_under_its_id_alone_are_folded_into_its_named_ones() -> None:
    from agent import metrics
    from agent.series.reading import Totals, merge_unnamed

    yields, futex, threads = metrics.SCHED_YIELD_CALLS.name, metrics.FUTEX_CALLS.name, metrics.THREADS.name
    named = Workload(container_id="c0ffee", container="web")
    alone = Workload(container_id="c0ffee")
    other = Workload(container_id="beef")  # unnamed, with no named twin: stays as it is
    workloads = {
        named: Totals(counts={yields: {"": 5.0}}, gauges={threads: {"": 3.0}}),
        alone: Totals(counts={yields: {"": 2.0}, futex: {"wait": 1.0}}, gauges={threads: {"": 9.0}}),
        other: Totals(counts={yields: {"": 7.0}}),
    }
    merged = merge_unnamed(workloads)
    assert set(merged) == {named, other}
    assert merged[named].counts == {yields: {"": 7.0}, futex: {"wait": 1.0}}
    assert merged[named].gauges == {threads: {"": 3.0}}, "the named series' gauge wins"
    assert merged[other].counts == {yields: {"": 7.0}}
    nothing_to_fold = {named: workloads[named], other: workloads[other]}
    assert merge_unnamed(nothing_to_fold) == nothing_to_fold


def test_the_standing_evaluation_reads_the_clock_source_each_time() -> None:
    """The kernel's watchdog can switch tsc to hpet while the agent runs: each evaluation's node has the source of
    that moment, not the one the agent started with."""
    from agent.diagnosis.standing import StandingFindings
    from agent.machine.clocksource import ClockSource

    sources = iter([ClockSource("tsc", ("tsc", "hpet")), ClockSource("hpet", ("hpet", "acpi_pm"))])
    standing = StandingFindings(node_cpus=2, clocksource=lambda: next(sources))
    first = standing._node_between(None, None)
    second = standing._node_between(None, None)
    assert (first.clocksource, first.available_clocksources) == ("tsc", ("tsc", "hpet"))
    assert (second.clocksource, second.available_clocksources) == ("hpet", ("hpet", "acpi_pm"))
    assert StandingFindings(node_cpus=2)._node_between(None, None).clocksource is None
