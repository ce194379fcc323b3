"""What one scrape costs with N threads alive in one Podman container, one scraper at a time and four at once.

    flock /tmp/schedwatch-containers.lock .venv/bin/python -m tests.load.scrape_cost 10000

Prints the wall time of each scrape (on the wire, nothing parsed) before the threads, with them, and with four
concurrent scrapers; the load tests' timings include the machine's other work, these are the agent's alone.
"""

from __future__ import annotations

import argparse
import threading
import time
import urllib.request
from pathlib import Path

from tests.load.test_threads import PodmanCli, threader_pid, wait_for_threads
from tests.support.agent import AgentProcess, require_root
from tests.support.containers import container_pid
from tests.support.workloads import build


def timed_scrape(url: str) -> float:
    began = time.monotonic()
    with urllib.request.urlopen(url, timeout=120) as response:
        response.read()
    return round(time.monotonic() - began, 3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("threads", type=int)
    parser.add_argument("--work", type=Path, default=Path("/tmp/schedwatch-scrape-cost"))
    args = parser.parse_args()
    require_root()
    build("threader")
    args.work.mkdir(parents=True, exist_ok=True)
    agent = AgentProcess(args.work / "agent.log", "--process-top-k", "20", "--state-dir", str(args.work))
    podman = PodmanCli()
    try:
        agent.wait_ready()
        print("no threads, one at a time:", [timed_scrape(agent.url) for _ in range(5)])
        command = f"/w/threader - {args.threads} 100 1; true"
        container = podman.run("cost", "sh", "-c", command, options=("-i", "--pids-limit", "-1"))
        wait_for_threads(threader_pid(container_pid(podman, container)), args.threads + 1)
        time.sleep(3)
        print(f"{args.threads} threads, one at a time:", [timed_scrape(agent.url) for _ in range(5)])
        concurrent: list[float] = []

        def five() -> None:
            concurrent.extend(timed_scrape(agent.url) for _ in range(5))

        scrapers = [threading.Thread(target=five) for _ in range(4)]
        for scraper in scrapers:
            scraper.start()
        for scraper in scrapers:
            scraper.join()
        print(f"{args.threads} threads, four at once:", sorted(concurrent))
    finally:
        podman.close()
        agent.stop()


if __name__ == "__main__":
    main()
