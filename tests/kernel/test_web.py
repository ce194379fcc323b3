"""/metrics over TLS and behind basic auth; slow clients do not hold up scrapes; bad web settings are one line."""

from __future__ import annotations

import base64
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.agent import REPO, AgentProcess
from tests.support.scrape import Scrape
from tests.support.web import (
    SlowClients,
    assert_back_to,
    make_certificate,
    open_sockets,
    scrape_curl,
    scrape_urllib,
    settled,
    threads,
)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_certificate(tmp_path_factory.mktemp("tls"))


def fetch(url: str, cafile: Path, user: str | None = None, password: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if user is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    context = ssl.create_default_context(cafile=str(cafile))
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, ""


def test_tls_and_basic_auth(certificate: tuple[Path, Path], tmp_path: Path) -> None:
    cert, key = certificate
    password_file = tmp_path / "password"
    password_file.write_text("s3cret\n")
    agent = AgentProcess(
        tmp_path / "agent.log",
        "--no-collector.sched",
        "--no-collector.cgroup_cpu",
        "--web.tls-cert-file",
        str(cert),
        "--web.tls-key-file",
        str(key),
        "--web.basic-auth-user",
        "prometheus",
        "--web.basic-auth-password-file",
        str(password_file),
        "--state-dir",
        str(tmp_path),
    )
    url = f"https://127.0.0.1:{agent.port}/metrics"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                fetch(url, cert)
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline and agent.process.poll() is None, agent.log()
                time.sleep(0.2)
        assert fetch(url, cert)[0] == 401
        assert fetch(url, cert, "prometheus", "wrong")[0] == 401
        assert fetch(url, cert, "someone", "s3cret")[0] == 401
        status, body = fetch(url, cert, "prometheus", "s3cret")
        assert status == 200 and "schedwatch_sched_yield_calls_total" in body
        with pytest.raises((urllib.error.URLError, ConnectionError)):
            urllib.request.urlopen(f"http://127.0.0.1:{agent.port}/metrics", timeout=5).read()
    finally:
        assert agent.stop() == 0


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--web.tls-cert-file", "/etc/hostname"], "--web.tls-cert-file and --web.tls-key-file go together"),
        (["--web.tls-cert-file", "/nope.pem", "--web.tls-key-file", "/nope.key"], "/nope.pem does not exist"),
        (["--web.basic-auth-user", "p"], "--web.basic-auth-user and --web.basic-auth-password-file go together"),
        (["--web.basic-auth-user", "p", "--web.basic-auth-password-file", "/nope"], "cannot read /nope"),
    ],
)
def test_bad_web_settings_are_one_line(flags: list[str], message: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "agent", "run", *flags], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"schedwatch: {message}"), result.stderr


WEB_TIMEOUT = 3.0
MAX_CONNECTIONS = 8


def test_slow_clients_on_the_tls_port_do_not_hold_up_scrapes(certificate: tuple[Path, Path], tmp_path: Path) -> None:
    """The defect: with TLS on, one client that connected and sent nothing kept every scrape waiting."""
    cert, key = certificate
    agent = AgentProcess(
        tmp_path / "agent.log",
        "--no-collector.syscalls",
        "--no-collector.sched",
        "--no-collector.cgroup_cpu",
        "--web.tls-cert-file",
        str(cert),
        "--web.tls-key-file",
        str(key),
        "--web.timeout",
        str(WEB_TIMEOUT),
        "--web.max-connections",
        str(MAX_CONNECTIONS),
        "--state-dir",
        str(tmp_path),
    )
    url = f"https://127.0.0.1:{agent.port}/metrics"
    try:
        wait_for_tls(url, agent)
        pid = agent.process.pid
        baseline_sockets = settled(lambda: open_sockets(pid))
        baseline_threads = settled(lambda: threads(pid))

        def scrape_quickly(times: int) -> Scrape:
            body = ""
            for attempt in range(times):
                seconds, body = (scrape_curl if attempt % 2 else scrape_urllib)(url, 10)
                assert seconds < 1.5, f"scrape {attempt} took {seconds:.2f} s"
            return Scrape(body)

        # Below the bound: two of each kind of slow client; the server closes each at its deadline.
        with (
            SlowClients(agent.port, "idle", 2) as idle,
            SlowClients(agent.port, "dribble", 2, tls=True) as dribbling,
            SlowClients(agent.port, "tls_stall", 2) as stalled,
        ):
            scrape_quickly(4)
            lifetimes = [life for clients in (idle, dribbling, stalled) for life in clients.wait_all_closed(5)]
        assert all(life is not None and WEB_TIMEOUT - 0.05 <= life <= WEB_TIMEOUT + 1.0 for life in lifetimes), (
            lifetimes
        )
        after_timeouts = scrape_quickly(1)
        assert after_timeouts.value("schedwatch_web_connections_dropped_total", reason="timeout") == 6
        assert after_timeouts.value("schedwatch_web_connections_dropped_total", reason="evicted") == 0

        # Far beyond the bound: scrapes still get through, every slow client is closed by the server.
        with SlowClients(agent.port, "idle", 30) as crowd:
            scrape_quickly(4)
            assert all(life is not None for life in crowd.wait_all_closed(WEB_TIMEOUT + 1))
        final = scrape_quickly(1)
        evicted = final.value("schedwatch_web_connections_dropped_total", reason="evicted")
        timed_out = final.value("schedwatch_web_connections_dropped_total", reason="timeout")
        assert evicted is not None and timed_out is not None
        assert evicted >= 30 - MAX_CONNECTIONS and evicted + timed_out - 6 == 30, (evicted, timed_out)

        assert_back_to(lambda: open_sockets(pid), baseline_sockets, "sockets open in the agent")
        assert_back_to(lambda: threads(pid), baseline_threads, "threads in the agent")
    finally:
        assert agent.stop() == 0, agent.log()


def wait_for_tls(url: str, agent: AgentProcess) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            scrape_urllib(url, 2)
            return
        except (urllib.error.URLError, ConnectionError):
            assert time.monotonic() < deadline and agent.process.poll() is None, agent.log()
            time.sleep(0.2)
