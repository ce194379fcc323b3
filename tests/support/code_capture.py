"""Capture the on-CPU samples the /metrics end-to-end test replays through the oncpu collector (root, BPF).

    sudo .venv/bin/python -m tests.support.code_capture

Loads the real sampling program (bpf/oncpu.bpf.c) at 199 Hz, runs tests/workloads/code_spinner for 2 s in the
golden tree's ``/schedwatch-golden/batch`` cgroup (cgroup2), reads the samples once while it is parked, and names each
address with the real symbolizer while the process lives. Writes tests/unit/fixtures/end-to-end/code.json: the
cgroup's samples with their names; pids and addresses are replaced by indexes (they name nothing once the process
is gone). Then regenerate the golden exposition as tests/unit/test_end_to_end_metrics.py says.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from agent.bpf.probes.oncpu import OnCpuProbe
from agent.collectors.common.limits import probe_limits
from agent.config import Settings
from agent.identity.placement import CgroupKeys
from agent.machine import kernel
from agent.machine.cgroups.paths import CgroupPathResolver
from agent.machine.facts import gather
from agent.symbols.symbolizer import Symbolizer
from tests.support.workloads import Workload, build

OUT = Path(__file__).resolve().parents[1] / "unit" / "fixtures" / "end-to-end" / "code.json"
CGROUP = "/schedwatch-golden/batch"
FREQUENCY = 199


def main() -> None:
    facts = gather()
    assert facts.headers is not None and facts.cgroup_root is not None, facts.headers_error
    kernel.prepare_headers(facts.headers, Path(tempfile.mkdtemp(prefix="schedwatch-capture-")))
    directory = facts.cgroup_root / CGROUP.lstrip("/")
    made = [parent for parent in (directory.parent, directory) if not parent.exists()]
    for path in made:
        path.mkdir()
    resolver = CgroupPathResolver(facts.cgroup_root)
    probe = OnCpuProbe(probe_limits(Settings(), CgroupKeys(resolver)), FREQUENCY)
    try:
        work = Workload(build("code_spinner"), directory, 2)
        samples = probe.read().samples
        paths = resolver.snapshot()
        symbolizer = Symbolizer()
        symbolizer.next_round()
        mine = [sample for sample in samples if paths.get(sample.workload) == CGROUP]
        pids = {pid: index + 1 for index, pid in enumerate(sorted({sample.tgid for sample in mine}))}
        rows = []
        for index, sample in enumerate(sorted(mine, key=lambda s: (s.tgid, s.kernel, s.address))):
            code = symbolizer.kernel(sample.address) if sample.kernel else symbolizer.user(sample.tgid, sample.address)
            rows.append(
                {
                    "cgroup": CGROUP,
                    "pid": pids[sample.tgid],
                    "address": index,
                    "kernel": sample.kernel,
                    "count": sample.count,
                    "library": code.library,
                    "version": code.version,
                    "function": code.function,
                }
            )
        work.release()
    finally:
        probe.close()
        for path in reversed(made):
            path.rmdir()
    OUT.write_text(json.dumps({"frequency": FREQUENCY, "samples": rows, "truth": work.truth}, indent=1) + "\n")
    print(f"wrote {OUT}: {len(rows)} addresses, {sum(row['count'] for row in rows)} samples")


if __name__ == "__main__":
    main()
