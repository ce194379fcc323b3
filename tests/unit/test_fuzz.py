"""Every parser of foreign text, fuzzed with hypothesis: on arbitrary input and on mutations of real fixtures it
returns a result or raises its documented error, never another exception; and the cgroup_cpu collector fed
hostile cgroup files never raises out of collect().

Inputs are what a tenant, a kernel or a runtime could hand the agent: cgroup paths (the container id parser),
/proc/PID/cgroup, mountinfo, tracepoint format files, protobuf wire (CRI and containerd answers), Docker-API JSON,
and the cgroup CPU files (cpu.stat, cpu.max, cpu.cfs_*, cpuset lists, cgroup.procs).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from agent import metrics
from agent.collectors import CollectorContext
from agent.collectors.cgroup_cpu import CgroupCpuCollector
from agent.config import Settings
from agent.exposition.text import TextWriter
from agent.identity.labels import SampleGuard
from agent.identity.paths import container_id_from_path
from agent.identity.resolver import IdentityResolver
from agent.identity.runtimes import ContainerInfo, RuntimeAnswerInvalid, RuntimeUnavailable, protowire
from agent.identity.runtimes.docker import DockerClient
from agent.identity.workload import workload_for_cgroup
from agent.machine import kernel, procfs
from agent.machine.cgroups.cpu import read_cpu_v2
from agent.machine.cgroups.files import parse_flat_keyed
from agent.machine.cgroups.layout import CgroupLayout, parse_mountinfo, parse_proc_cgroup
from agent.machine.cgroups.paths import CgroupPathResolver
from agent.machine.cpus import CPU_NUMBER_LIMIT, parse_cpu_list
from agent.machine.facts import MachineFacts

FIXTURES = Path(__file__).parent / "fixtures"
FAST = settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
FILES = settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
CONTAINER_ID = "3f1c0e4b6f0d2a9c8b7e6d5c4b3a29181706f5e4d3c2b1a0f9e8d7c6b5a49382"


def fixture_bytes(pattern: str) -> list[bytes]:
    found = [path.read_bytes() for path in sorted(FIXTURES.glob(pattern))]
    assert found, f"no fixtures match {pattern}"
    return found


@st.composite
def mutated(draw: st.DrawFn, seeds: list[bytes]) -> bytes:
    """A real fixture with a few edits: bytes deleted, inserted, duplicated or flipped."""
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(data)))
        edit = draw(st.sampled_from(["delete", "insert", "duplicate", "flip"]))
        if edit == "delete":
            del data[at : at + draw(st.integers(1, 40))]
        elif edit == "insert":
            data[at:at] = draw(st.binary(max_size=40) | st.sampled_from([b":", b"\n", b" - ", b"\xff", b"\\040"]))
        elif edit == "duplicate":
            data[at:at] = data[at : at + draw(st.integers(1, 200))]
        elif data and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
    return bytes(data)


def agent_text(raw: bytes) -> str:
    """Bytes as the agent decodes what it reads (agent.machine.procfs: lossless, undecodable bytes as surrogates)."""
    return procfs.decode(raw)


def any_text(seeds: list[bytes]) -> st.SearchStrategy[str]:
    return st.one_of(st.text(), st.binary().map(agent_text), mutated(seeds).map(agent_text))


WAIT_BUCKETS = (("1e-05", 1), ("0.001", 4), ("+Inf", 7))  # cumulative, as the syscalls collector writes them


def exposition_of(labels: tuple[str, ...]) -> str:
    """A workload's series with these label values, written by the agent's own text writer (agent.exposition.text)
    into the families the syscalls collector fills: a counter and a histogram. Decoded strictly: the text must be
    UTF-8."""
    calls = metrics.SCHED_YIELD_CALLS.family()
    calls.add_metric(labels, 12345678901)
    waits = metrics.FUTEX_WAIT_DURATION.family()
    waits.add_metric(labels, WAIT_BUCKETS, 0.125)
    return TextWriter().write([calls, waits]).decode("utf-8")


def parsed_samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every sample, as prometheus_client's text parser reads them back."""
    return [(s.name, s.labels, s.value) for family in text_string_to_metric_families(text) for s in family.samples]


# --- cgroup paths -> container id and workload labels ------------------------------------------------------------


def cgroup_paths() -> st.SearchStrategy[str]:
    real = [line.split(b":", 2)[2] for seed in fixture_bytes("proc-cgroup/*.txt") for line in seed.splitlines()]
    components = st.sampled_from(["docker", "kubepods", "libpod-", "crio-", ".scope", ".slice", ":", CONTAINER_ID])
    built = st.lists(st.one_of(components, st.text(max_size=80)), max_size=8).map(lambda parts: "/".join(parts))
    return st.one_of(built, any_text(real))


@FAST
@given(cgroup_paths())
def test_container_id_from_any_path_is_empty_or_a_hex_id_taken_from_it(path: str) -> None:
    found = container_id_from_path(path)
    assert found == "" or (len(found) == 64 and set(found) <= set("0123456789abcdef") and found in path)


@FAST
@given(st.one_of(cgroup_paths(), st.none()))
def test_workload_labels_of_any_path_are_bounded(path: str | None) -> None:
    labels = workload_for_cgroup(path).labels()
    assert all(isinstance(value, str) and len(value) <= 200 for value in labels), labels


@FAST
@given(cgroup_paths())
@example("/system.slice/bars\udcffbad")
def test_workload_labels_of_any_path_read_back_exactly_from_the_agents_exposition(path: str) -> None:
    labels = workload_for_cgroup(path).labels()
    assert SampleGuard().keep_valid_rows([labels]) == [True], "the exporter would drop this workload's series"
    named = dict(zip(metrics.WORKLOAD_LABELS, labels, strict=True))
    expected = [("schedwatch_sched_yield_calls_total", named, 12345678901.0)]
    expected += [("schedwatch_futex_wait_duration_seconds_bucket", {**named, "le": le}, n) for le, n in WAIT_BUCKETS]
    expected += [
        ("schedwatch_futex_wait_duration_seconds_count", named, 7.0),
        ("schedwatch_futex_wait_duration_seconds_sum", named, 0.125),
    ]
    assert parsed_samples(exposition_of(labels)) == expected


@settings(max_examples=25, deadline=None, database=None)
@given(st.lists(cgroup_paths(), min_size=1, max_size=40, unique=True))
@example(["/system.slice/bars\udcffbad", '/a"b\\c\nd', "/kubepods/pod\u2028x/" + CONTAINER_ID])
def test_workload_labels_of_any_paths_pass_promtool(paths: list[str]) -> None:
    """promtool (Prometheus' own Go parser and linter) accepts the agent's text for any cgroup paths; one promtool
    run per example of 40 workloads keeps it cheap."""
    calls = metrics.SCHED_YIELD_CALLS.family()
    waits = metrics.FUTEX_WAIT_DURATION.family()
    seen = set()
    for index, path in enumerate(paths):
        labels = workload_for_cgroup(path).labels()
        if labels in seen:  # two paths may name one workload (both unnamed): one series each, as the model keeps
            continue
        seen.add(labels)
        calls.add_metric(labels, index)
        waits.add_metric(labels, WAIT_BUCKETS, 0.125 * index)
    checked = subprocess.run(
        [PROMTOOL, "check", "metrics"], input=TextWriter().write([calls, waits]), capture_output=True, check=False
    )
    assert checked.returncode == 0, (checked.stdout + checked.stderr).decode()


# --- /proc/PID/cgroup ---------------------------------------------------------------------------------------------


@FAST
@given(any_text(fixture_bytes("proc-cgroup/*.txt") + fixture_bytes("proc-self-cgroup-*.txt")))
def test_proc_cgroup_parses_any_text_into_controller_paths(text: str) -> None:
    paths = parse_proc_cgroup(text)
    assert all(isinstance(key, str) and isinstance(value, str) for key, value in paths.items())
    assert all("\n" not in value for value in paths.values())


# --- mountinfo ----------------------------------------------------------------------------------------------------


@FILES
@given(st.one_of(st.binary(), mutated(fixture_bytes("mountinfo-*.txt"))))
@example(b"\x80")
def test_mountinfo_parses_any_bytes_or_says_it_cannot_read_them(raw: bytes) -> None:
    layout = parse_mountinfo(procfs.decode(raw))
    assert isinstance(layout, CgroupLayout)
    assert all(isinstance(path, Path) for path in layout.v1.values())


# --- tracepoint formats -------------------------------------------------------------------------------------------

SCHED_SWITCH = FIXTURES / "tracefs-6.18" / "events" / "sched" / "sched_switch" / "format"


def format_texts() -> st.SearchStrategy[bytes]:
    seed = SCHED_SWITCH.read_bytes()
    expressions = st.lists(
        st.sampled_from(["(", ")", "|", "+", "-", "<<", ">>", "0x", "1", "0xff", "99999", "REC->prev_state & "]),
        max_size=60,
    ).map(lambda parts: b"print fmt: REC->prev_state & (" + "".join(parts).encode() + b")")
    return st.one_of(st.binary(), mutated([seed]), expressions)


@FILES
@given(format_texts())
def test_tracepoint_format_gives_fields_and_masks_or_none(raw: bytes) -> None:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        event = root / "events" / "sched" / "sched_switch"
        event.mkdir(parents=True)
        (event / "format").write_bytes(raw)
        fields = kernel.tracepoint_fields("sched", "sched_switch", root)
        assert fields is None or all(isinstance(name, str) for name in fields)
        for mask in (kernel.sched_switch_blocked_mask(root), kernel.sched_switch_dead_mask(root)):
            assert mask is None or isinstance(mask, int)


@pytest.mark.parametrize(
    "expression",
    ["(1 << 4000000000)", "(" * 150 + "1" + ")" * 150, "(" + "|".join(["1"] * 5000) + ")"],
    ids=["huge-shift", "deep-nesting", "long-chain"],
)
def test_hostile_masks_in_a_format_give_none_quickly(tmp_path: Path, expression: str) -> None:
    event = tmp_path / "events" / "sched" / "sched_switch"
    event.mkdir(parents=True)
    (event / "format").write_text(f"print fmt: REC->prev_state & {expression}")
    mask = kernel.sched_switch_blocked_mask(tmp_path)
    assert mask is None or (isinstance(mask, int) and mask.bit_length() <= 64)


# --- protobuf wire (CRI and containerd answers) -------------------------------------------------------------------


def cri_like_answers() -> list[bytes]:
    """Messages shaped like a CRI ContainerStatus answer (status = 1: id, metadata {name}, labels), made with the
    same encoders the test runtimes use."""
    labels = {"io.kubernetes.pod.name": "web-0", "io.kubernetes.pod.namespace": "shop", "io.kubernetes.pod.uid": "u"}
    status = (
        protowire.string_field(1, CONTAINER_ID)
        + protowire.message_field(2, protowire.string_field(1, "app") + protowire.varint_field(2, 0))
        + protowire.varint_field(6, 1_700_000_000_000_000_000)
        + protowire.string_map_field(12, labels)
    )
    return [protowire.message_field(1, status), protowire.string_map_field(1, labels)]


@FAST
@given(st.one_of(st.binary(max_size=300), mutated(cri_like_answers())), st.integers(0, 20))
def test_protobuf_readers_give_values_or_value_error(raw: bytes, number: int) -> None:
    for read in (protowire.message, protowire.string, protowire.string_map_of):
        try:
            value: object = read(raw, number)
        except ValueError:
            continue
        assert isinstance(value, bytes | str | dict)
    try:
        decoded = list(protowire.fields(raw))
    except ValueError:
        return
    assert all(isinstance(n, int) and isinstance(v, int | bytes) for n, v in decoded)


# --- Docker-API JSON ----------------------------------------------------------------------------------------------


class FakeDockerApi:
    """A unix socket answering every request with one fixed HTTP 200 body (a runtime answering garbage cannot be
    produced with a real runtime)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.body = b"{}"
        self._server = socket.socket(socket.AF_UNIX)
        self._server.bind(str(path))
        self._server.listen(8)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._server.accept()
            except OSError:
                return
            with connection:
                request = b""
                while b"\r\n\r\n" not in request:
                    chunk = connection.recv(4096)
                    if not chunk:
                        break
                    request += chunk
                body = self.body
                head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                connection.sendall(head.encode() + b"Connection: close\r\n\r\n" + body)

    def close(self) -> None:
        self._server.close()


@pytest.fixture(scope="module")
def docker_api() -> Iterator[FakeDockerApi]:
    with tempfile.TemporaryDirectory() as directory:
        api = FakeDockerApi(Path(directory) / "docker.sock")
        yield api
        api.close()


def docker_documents() -> st.SearchStrategy[bytes]:
    seed = json.dumps(
        {
            "Id": CONTAINER_ID,
            "Name": "/web",
            "Config": {"Labels": {"io.kubernetes.container.name": "app", "io.kubernetes.pod.name": "web-0"}},
        }
    ).encode()
    scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20))
    values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner))
    keys = st.sampled_from(["Name", "Config", "Labels", "io.kubernetes.container.name", "io.kubernetes.pod.name"])
    shaped = st.recursive(
        values, lambda inner: st.dictionaries(keys | st.text(max_size=5), inner, max_size=4), max_leaves=12
    )
    return st.one_of(shaped.map(lambda doc: json.dumps(doc).encode()), mutated([seed]), st.binary(max_size=100))


@settings(max_examples=80, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(docker_documents())
@example(b"[]")
def test_docker_answers_give_names_or_runtime_unavailable(docker_api: FakeDockerApi, body: bytes) -> None:
    docker_api.body = body
    client = DockerClient(docker_api.path, timeout=2.0)
    try:
        info = client.inspect(CONTAINER_ID)
    except (RuntimeUnavailable, RuntimeAnswerInvalid):
        return
    assert info is None or (
        isinstance(info, ContainerInfo)
        and all(isinstance(value, str) for value in (info.container, info.pod, info.namespace))
    )


# --- cgroup CPU files, parsers and the collector ------------------------------------------------------------------

V2_CPU_STAT = b"usage_usec 2511224\nuser_usec 2498710\nnr_periods 31\nnr_throttled 29\nthrottled_usec 1423518\n"
V1_CPU_STAT = b"nr_periods 51\nnr_throttled 50\nthrottled_time 7489000000\nnr_bursts 0\nburst_time 0\n"
SEEDS = {
    "cpu.stat": [V2_CPU_STAT, V1_CPU_STAT],
    "cpu.max": [b"max 100000\n", b"50000 100000\n"],
    "cpu.cfs_quota_us": [b"-1\n", b"50000\n"],
    "cpu.cfs_period_us": [b"100000\n"],
    "cpuset.cpus.effective": [b"0-1\n", b"0-3,8,10-11\n"],
    "cgroup.threads": [b"101\n102\n"],
    "cgroup.procs": [b"101\n"],
}


def cgroup_file(name: str) -> st.SearchStrategy[bytes]:
    hostile = st.sampled_from([b"", b" ", b"\n", b"max", b"-", b"--5", b"\xb2", "²\n".encode(), b"1-", b"3-1", b"x y"])
    return st.one_of(hostile, st.binary(max_size=40), mutated(SEEDS[name]))


@FAST
@given(
    st.one_of(
        st.sampled_from(["3-1", "1-", "x"]),
        st.text(max_size=40),
        mutated(SEEDS["cpuset.cpus.effective"]).map(agent_text),
    )
)
@example("3-1")
@example("0-99999999999")
def test_cpu_list_gives_cpu_numbers_or_value_error(text: str) -> None:
    try:
        cpus = parse_cpu_list(text)
    except ValueError:
        return
    assert all(0 <= cpu < CPU_NUMBER_LIMIT for cpu in cpus)


@FAST
@given(
    st.one_of(st.sampled_from(["a \u00b2", "a --5"]), st.text(max_size=80), mutated(SEEDS["cpu.stat"]).map(agent_text))
)
@example("a --5")
def test_flat_keyed_file_parses_any_text(text: str) -> None:
    values = parse_flat_keyed(text)
    assert all(isinstance(value, int) for value in values.values())


def laid_out(root: Path, files: dict[str, bytes]) -> None:
    for name, raw in files.items():
        (root / name).write_bytes(raw)


@FILES
@given(st.fixed_dictionaries({name: cgroup_file(name) for name in ("cpu.stat", "cpu.max", "cpuset.cpus.effective")}))
@example({"cpu.stat": V2_CPU_STAT, "cpu.max": b" ", "cpuset.cpus.effective": b""})
def test_cgroup2_cpu_files_give_control_or_none(files: dict[str, bytes]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        (root / "work").mkdir()
        laid_out(root / "work", files)
        control = read_cpu_v2(root, "/work", 2)
        assert control is None or control.limit_cores >= 0


def cpu_collector(root: Path, v1_cpu: Path | None = None) -> CgroupCpuCollector:
    """The real collector over a cgroup2 tree at *root* (and a v1 cpu hierarchy when given)."""
    layout = CgroupLayout(unified=root, v1={"cpu": v1_cpu} if v1_cpu else {})
    facts = MachineFacts("6.18", True, {}, False, None, None, "", layout, root, None)
    context = CollectorContext(Settings(), facts, CgroupPathResolver(root), None, IdentityResolver([]))  # type: ignore[arg-type]
    return CgroupCpuCollector(context)


def hostile_tree(v1: bool) -> st.SearchStrategy[dict[str, bytes]]:
    names = ["cgroup.threads", "cgroup.procs"]
    names += ["cpu.stat", "cpu.cfs_quota_us", "cpu.cfs_period_us"] if v1 else ["cpu.stat", "cpu.max"]
    return st.fixed_dictionaries({name: cgroup_file(name) for name in names})


def collect_over(files: dict[str, bytes], v1: bool) -> list[object]:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory) / "unified"
        work = root / "work"
        work.mkdir(parents=True)
        laid_out(root, {"cgroup.procs": b"", "cgroup.controllers": b"" if v1 else b"cpu\n"})
        laid_out(work, {name: raw for name, raw in files.items() if name.startswith("cgroup.")})
        v1_cpu = None
        if v1:
            v1_cpu = Path(directory) / "cpu"
            (v1_cpu / "work").mkdir(parents=True)
            laid_out(v1_cpu / "work", {name: raw for name, raw in files.items() if name.startswith("cpu.")})
        else:
            laid_out(work, {name: raw for name, raw in files.items() if name.startswith("cpu.")})
        return list(cpu_collector(root, v1_cpu).collect())


@FILES
@given(hostile_tree(v1=False))
@example({"cgroup.threads": b"\xb2", "cgroup.procs": b"", "cpu.stat": b"", "cpu.max": b""})
def test_cgroup_cpu_collector_never_raises_on_hostile_cgroup2_files(files: dict[str, bytes]) -> None:
    families = collect_over(files, v1=False)
    assert families


@FILES
@given(hostile_tree(v1=True))
@example(
    {
        "cgroup.threads": b"1\n",
        "cgroup.procs": b"1\n",
        "cpu.stat": V1_CPU_STAT,
        "cpu.cfs_quota_us": b"",
        "cpu.cfs_period_us": b"100000\n",
    }
)
def test_cgroup_cpu_collector_never_raises_on_hostile_v1_files(files: dict[str, bytes]) -> None:
    families = collect_over(files, v1=True)
    assert families


def test_cgroup_cpu_collector_reads_the_real_values_of_a_sane_tree() -> None:
    """The fuzzed collector is the real one: on sane files it reports exactly what they say."""
    files = {"cgroup.threads": b"101\n102\n", "cgroup.procs": b"101\n", "cpu.stat": V2_CPU_STAT}
    files["cpu.max"] = b"50000 100000\n"
    families = {family.name: family for family in collect_over(files, v1=False)}  # type: ignore[attr-defined]
    threads = [s.value for s in families["schedwatch_threads"].samples if s.labels["cgroup"] == "/work"]
    limit = [s.value for s in families["schedwatch_cpu_limit_cores"].samples if s.labels["cgroup"] == "/work"]
    assert (threads, limit) == ([2], [0.5])
