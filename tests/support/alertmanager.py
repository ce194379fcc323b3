"""A real Alertmanager (Debian's package) on 127.0.0.1, delivering to a webhook receiver run by the test."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from tests.support.agent import free_port
from tests.support.waiting import wait_for_http


class WebhookReceiver:
    """An HTTP endpoint on 127.0.0.1 that keeps every alert Alertmanager posts to it."""

    def __init__(self) -> None:
        self.alerts: list[dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.alerts.extend(json.loads(body).get("alerts", []))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()


class Alertmanager:
    """prometheus-alertmanager routing everything to one webhook, grouping and repeating fast."""

    def __init__(self, workdir: Path, webhook: str) -> None:
        binary = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
        if binary is None:
            raise RuntimeError("alertmanager is missing: apt-get install prometheus-alertmanager")
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        config = {
            "route": {
                "receiver": "webhook",
                "group_by": ["alertname", "container"],
                "group_wait": "1s",
                "group_interval": "1s",
                "repeat_interval": "1h",
            },
            "receivers": [{"name": "webhook", "webhook_configs": [{"url": webhook, "send_resolved": False}]}],
        }
        (workdir / "alertmanager.yml").write_text(yaml.safe_dump(config))
        self._log = (workdir / "alertmanager.log").open("w")
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={workdir / 'alertmanager.yml'}",
                f"--storage.path={workdir / 'am-data'}",
                f"--web.listen-address={self.address}",
                "--cluster.listen-address=",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        wait_for_http(f"http://{self.address}/-/ready", self.process, workdir / "alertmanager.log")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)
        self._log.close()
