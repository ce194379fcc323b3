"""The HTML report: one self-contained page that fetches nothing, escapes every name, embeds its data as JSON,
and renders in headless Chromium (installed by scripts/setup.sh test; a missing Chromium fails, never skips)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from agent.diagnosis.render.html_page import comparison_page, diagnosis_page
from agent.diagnosis.render.json_report import comparison_to_json, to_json
from tests.unit.report_samples import HOSTILE_CONTAINER, sample_comparison, sample_diagnosis

ALLOWED_TAGS = {
    "html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "span", "div", "b", "table", "tr", "th",
    "td", "ul", "ol", "li", "svg", "rect", "text", "script",
}  # fmt: skip


class Tags(HTMLParser):
    """Every start tag with its attributes, and the text of script elements."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts.append(data)


def parsed(page: str) -> Tags:
    tags = Tags()
    tags.feed(page)
    tags.close()
    return tags


@pytest.mark.parametrize("page", [diagnosis_page(sample_diagnosis()), comparison_page(sample_comparison())])
def test_the_page_is_self_contained(page: str) -> None:
    tags = parsed(page)
    assert {tag for tag, _ in tags.tags} <= ALLOWED_TAGS
    for tag, attrs in tags.tags:
        assert "src" not in attrs and "href" not in attrs, (tag, attrs)
        assert tag != "script" or attrs == {"type": "application/json", "id": "schedwatch-data"}
    assert not re.search(r"https?://", page.replace("https://evil.example", "")), "a URL other than the name's"
    assert "url(" not in page and "@import" not in page


HOSTILE_COMM_ESCAPED = "&lt;img src=https://evil.example/x.png&gt;"


def test_every_name_is_escaped() -> None:
    page = diagnosis_page(sample_diagnosis())
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img" not in page and HOSTILE_COMM_ESCAPED in page
    assert "\x1b" not in page and "\\x1b[31mred&lt;/td&gt;" in page  # the terminal escape is shown, not kept
    comparison = comparison_page(sample_comparison())
    assert "cloud <b>VM</b>" not in comparison and "cloud &lt;b&gt;VM&lt;/b&gt;" in comparison
    assert HOSTILE_CONTAINER not in comparison


def test_the_sick_workload_comes_first_as_in_the_text_report() -> None:
    page = diagnosis_page(sample_diagnosis())
    sick = page.index("<h2>[bold red]pwn[/] &lt;script&gt;")
    assert sick < page.index("<h2>/system.slice/sshd.service") and page.index("<h2>Node</h2>") < sick


def test_the_embedded_data_is_the_diagnosis() -> None:
    diagnosis = sample_diagnosis()
    tags = parsed(diagnosis_page(diagnosis))
    assert len(tags.scripts) == 1
    assert "</" not in tags.scripts[0]  # a name cannot close the script element
    assert json.loads(tags.scripts[0]) == json.loads(json.dumps(to_json(diagnosis)))
    comparison = sample_comparison()
    scripts = parsed(comparison_page(comparison)).scripts
    assert len(scripts) == 1 and json.loads(scripts[0]) == json.loads(json.dumps(comparison_to_json(comparison)))


def test_charts_are_drawn() -> None:
    page = diagnosis_page(sample_diagnosis())
    assert page.count("<svg") == 1 and "Time in system calls per thread" in page
    assert comparison_page(sample_comparison()).count("<svg") == 2  # A vs B, and A's threads


# --- in a real browser ------------------------------------------------------------------------------------------


# Chromium's own service traffic (clock, component updates, accounts), sent whatever the page is; seen here with
# Debian's chromium 156 despite --disable-background-networking.
BROWSER_OWN = ("google.com", "googleapis.com", "gvt1.com", "gstatic.com")


def host_of(request: str) -> str:
    target = request.split(" ", 1)[1]
    return re.sub(r"^[a-z]+://", "", target).split("/", 1)[0].split(":", 1)[0]


def page_requests() -> list[str]:
    """What the proxy saw, less the browser's own service traffic."""
    return [
        request
        for request in Recorder.seen
        if not any(host_of(request) == own or host_of(request).endswith("." + own) for own in BROWSER_OWN)
    ]


class Recorder(BaseHTTPRequestHandler):
    """A proxy that fetches nothing and remembers every request sent to it."""

    seen: ClassVar[list[str]] = []

    def _record(self) -> None:
        Recorder.seen.append(f"{self.command} {self.path}")
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = do_HEAD = do_CONNECT = _record

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def proxy() -> Iterator[int]:
    Recorder.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        raise RuntimeError("chromium is not installed: run scripts/setup.sh test (it installs Debian's chromium)")
    return found


def browse(page: Path, port: int, *extra: str) -> subprocess.CompletedProcess[str]:
    """Headless Chromium on *page*, every network request sent to the recording proxy on *port*."""
    command = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-default-apps",
        f"--proxy-server=http://127.0.0.1:{port}",
        "--proxy-bypass-list=<-loopback>",
        f"--user-data-dir={page.parent / 'profile'}",
        *extra,
        page.as_uri(),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=90, check=True)


def test_the_browser_is_seen_fetching_a_page_that_does(tmp_path: Path, proxy: int) -> None:
    """The control: a page with a remote image reaches the proxy, so the next test's silence means something."""
    page = tmp_path / "remote.html"
    page.write_text('<!DOCTYPE html><html><body><img src="http://fetch-me.invalid/x.png"></body></html>')
    browse(page, proxy, "--virtual-time-budget=3000", "--dump-dom")
    assert any(host_of(request) == "fetch-me.invalid" for request in page_requests()), Recorder.seen


def test_the_comparison_renders_in_chromium_and_fetches_nothing(tmp_path: Path, proxy: int) -> None:
    page = tmp_path / "report.html"
    page.write_text(comparison_page(sample_comparison()), encoding="utf-8")
    shot = tmp_path / "report.png"
    browse(page, proxy, "--virtual-time-budget=3000", "--window-size=1200,1600", f"--screenshot={shot}")
    dom = browse(page, proxy, "--virtual-time-budget=3000", "--dump-dom").stdout
    assert "thread-pool-oversubscription / yield-storm" in dom and "<svg" in dom
    assert "<img" not in dom  # the hostile name stayed text in the rendered document too
    assert page_requests() == []
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
