"""`schedwatch diagnose --from https://...` against the real agent started with the tls-auth overlay's settings (TLS
with a certificate naming `schedwatch`, basic auth), and against a real Prometheus behind TLS that asks for a client
certificate and basic auth, scraping that agent as the overlay's PodMonitor does. Certificates are made by openssl;
the overlay's flags and variables are read from deploy/, with /etc/schedwatch moved under the test's directory."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.parse
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent.diagnosis.inputs.live import fetch
from tests.support.agent import REPO, AgentProcess, free_port, require_root
from tests.support.diagnose import Diagnose
from tests.support.schemas import assert_valid
from tests.support.tls import Pair, issue, make_ca
from tests.support.workloads import CgroupSandbox, Workload

OVERLAY = REPO / "deploy" / "kubernetes" / "overlays" / "tls-auth" / "kustomization.yaml"
SECRETS = "/etc/schedwatch"  # where the overlay mounts its Secrets
YIELDS_PER_THREAD = 100_000
THREADS = 2
WINDOW = 6  # seconds, as in test_diagnose_live: room for the yields after the window opens


def overlay_settings() -> tuple[list[str], dict[str, str]]:
    """The agent's added flags and the container's added variables, as the overlay patches them in."""
    flags: list[str] = []
    environment: dict[str, str] = {}
    for patch in yaml.safe_load(OVERLAY.read_text())["patches"]:
        for operation in yaml.safe_load(patch["patch"]):
            if operation["path"].endswith("/args/-"):
                flags.append(operation["value"])
            elif operation["path"].endswith("/env/-"):
                environment[operation["value"]["name"]] = operation["value"]["value"]
    return flags, environment


@dataclass
class TlsAgent:
    agent: AgentProcess
    url: str  # https://127.0.0.1:PORT
    environment: dict[str, str]  # the overlay's SCHEDWATCH_FROM_* variables, with this test's paths
    ca: Pair
    secrets: Path


@pytest.fixture(scope="module")
def tls_agent(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsAgent]:
    require_root()
    secrets = tmp_path_factory.mktemp("etc-schedwatch")
    ca = make_ca(secrets / "ca")
    server = issue(ca, secrets, "server", "DNS:schedwatch")  # the name the PodMonitor checks, not an address
    (secrets / "tls").mkdir()
    shutil.copy(server.cert, secrets / "tls" / "tls.crt")
    shutil.copy(server.key, secrets / "tls" / "tls.key")
    shutil.copy(ca.cert, secrets / "tls" / "ca.crt")  # the Secret's ca.crt, as cert-manager writes it
    (secrets / "auth").mkdir()
    (secrets / "auth" / "password").write_text("s3cret\n")
    flags, environment = overlay_settings()
    assert len(flags) == 4 and all(flag.startswith("--web.") for flag in flags), flags
    assert set(environment) == {
        "SCHEDWATCH_FROM_TLS_CA_FILE",
        "SCHEDWATCH_FROM_TLS_SERVER_NAME",
        "SCHEDWATCH_FROM_BASIC_AUTH_USER",
        "SCHEDWATCH_FROM_BASIC_AUTH_PASSWORD_FILE",
    }
    flags = [flag.replace(SECRETS, str(secrets)) for flag in flags]
    environment = {name: value.replace(SECRETS, str(secrets)) for name, value in environment.items()}
    agent = AgentProcess(
        secrets / "agent.log",
        *flags,
        "--no-collector.sched",
        "--no-collector.cgroup_cpu",
        "--state-dir",
        str(tmp_path_factory.mktemp("state")),
    )
    url = f"https://127.0.0.1:{agent.port}"
    client = fetch.make_client(
        ca_file=ca.cert, server_name="schedwatch", user="prometheus", password_file=secrets / "auth" / "password"
    )
    deadline = time.monotonic() + 90
    while True:
        try:
            if b"schedwatch_build_info" in fetch.get(f"{url}/metrics", 10, 1 << 26, client=client):
                break
        except OSError:
            pass
        assert agent.process.poll() is None and time.monotonic() < deadline, agent.log()
        time.sleep(0.3)
    yield TlsAgent(agent, url, environment, ca, secrets)
    assert agent.stop() == 0, agent.log()


def diagnose_line(*flags: str, env: dict[str, str] | None = None) -> str:
    """The one line a failing `diagnose` prints (exit status 2)."""
    result = subprocess.run(
        [sys.executable, "-m", "agent", "diagnose", "--log-format", "json", *flags],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_diagnose_in_the_pod_reads_the_tls_agent_with_the_overlays_variables(
    tls_agent: TlsAgent, cgroups: CgroupSandbox, yielder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`kubectl exec ds/schedwatch -- schedwatch diagnose --from https://127.0.0.1:17953`: nothing but the URL."""
    for name, value in tls_agent.environment.items():
        monkeypatch.setenv(name, value)
    group = cgroups.make("tls-diagnose")
    diagnose = Diagnose("--duration", str(WINDOW), "--from", tls_agent.url, "--cgroup", cgroups.relative(group))
    opened = diagnose.wait_for_window()
    workload = Workload(yielder, group, YIELDS_PER_THREAD, THREADS)
    assert time.monotonic() - opened < WINDOW - 1.5
    try:
        report = diagnose.result()
        (view,) = report["workloads"]
        assert view["ref"]["cgroup"] == cgroups.relative(group)
        assert view["sched_yield_calls"] == YIELDS_PER_THREAD * THREADS
        assert report["sources"] == [f"agent {tls_agent.url}/metrics"]
        assert "deprecated_variable" not in diagnose.output
    finally:
        workload.release()


def client_flags(tls_agent: TlsAgent, password: Path | None = None) -> list[str]:
    return [
        *("--from.tls-ca-file", str(tls_agent.ca.cert), "--from.tls-server-name", "schedwatch"),
        *("--from.basic-auth-user", "prometheus"),
        *("--from.basic-auth-password-file", str(password or tls_agent.secrets / "auth" / "password")),
    ]


def test_a_wrong_password_is_one_line_naming_401(tls_agent: TlsAgent, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong"
    wrong.write_text("guess\n")
    assert diagnose_line("--from", tls_agent.url, "--duration", "1", *client_flags(tls_agent, wrong)) == (
        f"schedwatch diagnose: {tls_agent.url}/metrics answered HTTP 401 Unauthorized: it does not accept user "
        f"'prometheus' with the password in {wrong}: check both against what the server expects"
    )
    no_auth = client_flags(tls_agent)[:4]
    assert diagnose_line("--from", tls_agent.url, "--duration", "1", *no_auth) == (
        f"schedwatch diagnose: {tls_agent.url}/metrics answered HTTP 401 Unauthorized: it wants HTTP basic auth: "
        "give --from.basic-auth-user and --from.basic-auth-password-file (or their SCHEDWATCH_FROM_* variables)"
    )


def test_without_the_ca_or_the_name_it_is_one_line_about_the_certificate(tls_agent: TlsAgent) -> None:
    flags = client_flags(tls_agent)
    assert diagnose_line("--from", tls_agent.url, "--duration", "1", *flags[2:]) == (
        f"schedwatch diagnose: {tls_agent.url}/metrics: its certificate cannot be verified with the system's CAs "
        "(unable to get local issuer certificate): give the CA that signed it with --from.tls-ca-file"
    )
    assert diagnose_line("--from", tls_agent.url, "--duration", "1", *flags[:2], *flags[4:]) == (
        f"schedwatch diagnose: {tls_agent.url}/metrics: its certificate is not for the host in --from (IP address "
        "mismatch, certificate is not valid for '127.0.0.1'.): connect by a name the certificate carries, or give "
        "that name with --from.tls-server-name"
    )


def bcrypt_hash(password: str) -> str:
    """What Prometheus' web config wants for basic_auth_users (libxcrypt's bcrypt, through Python's crypt)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt  # deprecated since 3.11 (gone in 3.13): the one bcrypt here without another package

    hashed = crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH))
    assert hashed.startswith("$2b$"), hashed
    return hashed


@dataclass
class TlsPrometheus:
    url: str  # prometheus+https://127.0.0.1:PORT
    ca: Pair
    client: Pair
    password: Path

    def query(self, expr: str) -> float:
        """An instant query's first value (0 when it has none), over mutual TLS with basic auth."""
        reach = fetch.make_client(
            ca_file=self.ca.cert,
            cert_file=self.client.cert,
            key_file=self.client.key,
            user="diagnose",
            password_file=self.password,
        )
        base = self.url.removeprefix("prometheus+")
        answer = json.loads(
            fetch.get(f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expr})}", 30, 1 << 20, client=reach)
        )
        result = answer["data"]["result"]
        return float(result[0]["value"][1]) if result else 0.0


@pytest.fixture(scope="module")
def tls_prometheus(tls_agent: TlsAgent, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsPrometheus]:
    binary = shutil.which("prometheus")
    assert binary, "prometheus is missing: apt-get install prometheus"
    work = tmp_path_factory.mktemp("prometheus")
    server = issue(tls_agent.ca, work, "prometheus", "IP:127.0.0.1")
    client = issue(tls_agent.ca, work, "diagnose", usage="clientAuth")
    password = work / "password"
    password.write_text("pr0m\n")
    web = {
        "tls_server_config": {
            "cert_file": str(server.cert),
            "key_file": str(server.key),
            "client_auth_type": "RequireAndVerifyClientCert",
            "client_ca_file": str(tls_agent.ca.cert),
        },
        "basic_auth_users": {"diagnose": bcrypt_hash("pr0m")},
    }
    (work / "web.yml").write_text(yaml.safe_dump(web))
    scrape: dict[str, Any] = {  # as the overlay's PodMonitor: https, its CA and server name, basic auth
        "job_name": "schedwatch",
        "scheme": "https",
        "tls_config": {"ca_file": str(tls_agent.secrets / "tls" / "ca.crt"), "server_name": "schedwatch"},
        "basic_auth": {"username": "prometheus", "password_file": str(tls_agent.secrets / "auth" / "password")},
        "static_configs": [{"targets": [f"127.0.0.1:{tls_agent.agent.port}"]}],
    }
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"}, "scrape_configs": [scrape]}
    (work / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = (work / "prometheus.log").open("w")
    process = subprocess.Popen(
        [
            binary,
            f"--config.file={work / 'prometheus.yml'}",
            f"--web.config.file={work / 'web.yml'}",
            f"--storage.tsdb.path={work / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    reach = fetch.make_client(
        ca_file=tls_agent.ca.cert, cert_file=client.cert, key_file=client.key, user="diagnose", password_file=password
    )
    query = f"https://127.0.0.1:{port}/api/v1/query?query=count(up%3D%3D1)"
    deadline = time.monotonic() + 90
    while True:  # until it has scraped the agent over TLS
        try:
            answer = json.loads(fetch.get(query, 10, 1 << 20, client=reach))
            if answer["data"]["result"]:
                break
        except (OSError, ValueError):
            pass
        assert process.poll() is None and time.monotonic() < deadline, (work / "prometheus.log").read_text()
        time.sleep(0.5)
    yield TlsPrometheus(f"prometheus+https://127.0.0.1:{port}", tls_agent.ca, client, password)
    process.terminate()
    process.wait(30)
    log.close()


def prometheus_flags(server: TlsPrometheus, client: Pair | None = None, password: Path | None = None) -> list[str]:
    flags = ["--from.tls-ca-file", str(server.ca.cert)]
    if client is not None:
        flags += ["--from.tls-cert-file", str(client.cert), "--from.tls-key-file", str(client.key)]
    auth = ["--from.basic-auth-user", "diagnose", "--from.basic-auth-password-file", str(password or server.password)]
    return flags + auth


def test_a_prometheus_behind_mutual_tls_and_basic_auth_ranks_the_tls_agent(
    tls_agent: TlsAgent, tls_prometheus: TlsPrometheus, cgroups: CgroupSandbox, yielder: Path
) -> None:
    group = cgroups.make("tls-fleet")
    path = cgroups.relative(group)
    series = f'schedwatch_sched_yield_calls_total{{cgroup="{path}"}}'
    first = Workload(yielder, group, 1, 1)  # the series exists (at 1) before the storm
    storm = None
    try:
        wait_for(tls_prometheus, f"count_over_time({series}[1m])", 3)
        storm = Workload(yielder, group, YIELDS_PER_THREAD, THREADS)
        total = YIELDS_PER_THREAD * THREADS
        wait_for(tls_prometheus, series, total + 1)
        time.sleep(2)
        result = subprocess.run(
            [
                *(sys.executable, "-m", "agent", "diagnose", "--json", "--duration", "120", "--cgroup", path),
                *("--from", tls_prometheus.url, *prometheus_flags(tls_prometheus, tls_prometheus.client)),
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        first.release()
        if storm is not None:
            storm.release()
    assert result.returncode == 0, result.stderr
    ranking = json.loads(result.stdout)
    instance = f"127.0.0.1:{tls_agent.agent.port}"
    assert ranking["schema"] == "schedwatch.fleet/v1" and ranking["nodes"] == [instance]
    assert_valid(ranking)
    (row,) = ranking["workloads"]
    assert (row["instance"], row["workload"]["cgroup"]) == (instance, path)
    # As in test_diagnose_live's fleet test: exactly the storm's yields (and the first 1 when its first sample is
    # in the range), over the time the workload's series cover.
    assert row["sched_yield_per_second"] * row["seconds"] == pytest.approx(total, abs=1.5), row


def wait_for(server: TlsPrometheus, expr: str, value: float, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while (found := server.query(expr)) != value:
        assert time.monotonic() < deadline, f"{expr} is {found}, not {value}, after {timeout} s"
        time.sleep(0.5)


def test_a_prometheus_asking_for_a_client_certificate_says_so(tls_prometheus: TlsPrometheus, tmp_path: Path) -> None:
    base = tls_prometheus.url.removeprefix("prometheus+")
    line = diagnose_line("--from", tls_prometheus.url, *prometheus_flags(tls_prometheus))
    assert line.startswith(f"schedwatch diagnose: Prometheus at {base}: it ")
    assert "client certificate" in line and "--from.tls-cert-file and --from.tls-key-file" in line
    stranger = issue(make_ca(tmp_path / "other", "other-ca"), tmp_path, "stranger", usage="clientAuth")
    line = diagnose_line("--from", tls_prometheus.url, *prometheus_flags(tls_prometheus, stranger))
    assert line.startswith(f"schedwatch diagnose: Prometheus at {base}: it ")
    assert f"the client certificate in {stranger.cert}" in line and "signed by a CA the server trusts" in line
    wrong = tmp_path / "wrong"
    wrong.write_text("guess\n")
    line = diagnose_line("--from", tls_prometheus.url, *prometheus_flags(tls_prometheus, tls_prometheus.client, wrong))
    assert line == (
        f"schedwatch diagnose: {base} answered HTTP 401 Unauthorized: it does not accept user 'diagnose' with the "
        f"password in {wrong}: check both against what the server expects"
    )
