"""/metrics over TLS and behind basic auth; bad web settings are one clear line."""

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


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


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
