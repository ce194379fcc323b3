"""python -m tests.scenarios.calibrate [--runs N] [--window S] [--out FILE] [SCENARIO ...]

Runs each scenario in its own cgroup next to a real agent and prints, per run, the rates the diagnosis rules are
set against (one JSON object per line, also appended to --out). Needs root.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from tests.scenarios.catalog import BY_NAME, SCENARIOS, Scenario
from tests.scenarios.live import ScenarioCgroup, running
from tests.scenarios.measure import point, window
from tests.support.agent import AgentProcess, require_root
from tests.support.workloads import CgroupSandbox

WARM_UP = 3.0  # numpy's import and the pool's start are done by then


def measure(agent: AgentProcess, sandbox: CgroupSandbox, scenario: Scenario, seconds: float) -> dict[str, object]:
    """One run: warm up, then one window of *seconds*."""
    group = ScenarioCgroup(sandbox, scenario.name, scenario.quota, scenario.memory_limit)
    with running(scenario, group, WARM_UP + seconds + 300, sandbox) as process:
        time.sleep(WARM_UP)
        before = point(agent, group)
        time.sleep(seconds)
        after = point(agent, group)
        if process.poll() is not None:
            assert process.stderr is not None and process.stdout is not None
            output = (process.stdout.read() + process.stderr.read()).decode(errors="replace")
            raise RuntimeError(f"{scenario.name} ended early ({process.returncode}): {output}")
    measured = window(before, after, group.label).as_dict()
    sandbox.remove(group.v2)
    return {"scenario": scenario.name, "load": os.getloadavg()[0], **measured}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--window", type=float, default=10.0)
    parser.add_argument("--out", type=Path)
    parser.add_argument("scenarios", nargs="*", choices=[[], *BY_NAME], default=[])
    options = parser.parse_args()
    require_root()
    chosen = [BY_NAME[name] for name in options.scenarios] or list(SCENARIOS)
    sandbox = CgroupSandbox()
    with tempfile.TemporaryDirectory(prefix="schedwatch-calibrate-") as work:
        agent = AgentProcess(Path(work) / "agent.log", "--state-dir", work)
        try:
            agent.wait_ready()
            for run in range(options.runs):
                for scenario in chosen:
                    try:
                        result = {"run": run + 1, **measure(agent, sandbox, scenario, options.window)}
                    except RuntimeError as error:  # one bad run (a busy machine) does not end the calibration
                        print(f"{scenario.name} run {run + 1}: {error}", file=sys.stderr, flush=True)
                        continue
                    line = json.dumps(result)
                    print(line, flush=True)
                    if options.out:
                        with options.out.open("a") as out:
                            out.write(line + "\n")
        finally:
            agent.stop()
            sandbox.cleanup()


if __name__ == "__main__":
    sys.exit(main())
