"""A real Prometheus (Debian's package) on 127.0.0.1, scraping given targets fast, for dashboard and alert tests."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from tests.support.agent import free_port
from tests.support.waiting import wait_for_http


class Prometheus:
    """prometheus --config.file=... on a free port; query it over its HTTP API."""

    def __init__(
        self,
        workdir: Path,
        targets: list[str],
        scrape_interval: str = "1s",
        rule_files: list[Path] | None = None,
        alertmanager: str | None = None,
    ) -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            raise RuntimeError("prometheus is missing: apt-get install prometheus")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config: dict[str, Any] = {
            "global": {"scrape_interval": scrape_interval, "evaluation_interval": scrape_interval},
            "scrape_configs": [{"job_name": "schedwatch", "static_configs": [{"targets": targets}]}],
        }
        if rule_files:
            config["rule_files"] = [str(p) for p in rule_files]
        if alertmanager:
            config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config))
        log = workdir / "prometheus.log"
        for attempt in range(3):
            self._log = log.open("w")
            self.process = subprocess.Popen(
                [
                    binary,
                    f"--config.file={workdir / 'prometheus.yml'}",
                    f"--storage.tsdb.path={workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                stdout=self._log,
                stderr=subprocess.STDOUT,
            )
            try:
                wait_for_http(f"{self.url}/-/ready", self.process, log)
                return
            except RuntimeError:
                self._log.close()
                if attempt == 2 or "address already in use" not in log.read_text():
                    raise
            # Another test process took the free port before Prometheus bound it.
            self.port = free_port()
            self.url = f"http://127.0.0.1:{self.port}"

    def api(self, path: str, **params: str) -> Any:
        """GET /api/v1/<path> and return its data; errors raise."""
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=30) as response:
            document = json.loads(response.read())
        if document.get("status") != "success":
            raise AssertionError(f"{path} {params}: {document}")
        return document["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector (an error fails the caller)."""
        data = self.api("query", query=expr)
        result: list[dict[str, Any]] = data["result"]
        return result

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)
        self._log.close()
