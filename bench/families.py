"""Issue-23 benchmark: what counting (and timing) every system call by family costs, next to its floors and peers.

One workload: a getppid(2) loop pinned to CPU 1, in a cgroup of its own. Configurations, interleaved in one run:
nothing attached; empty raw tracepoint programs on raw_syscalls sys_enter and sys_exit (the floor of any program
on every call); programs that only read the clock there (the floor of any program that times a call); the agent's
syscall_families collector alone, counting only (--syscall-timed-workloads 0), by default with another workload
timed but not this one, by default with this one timed, and timing every workload (--syscall-time all); bcc's
syscount (counts per syscall; -L adds latency); bpftrace one-liners counting per cgroup and syscall (and timing).
Then the kernel's own accounting (--bpf-stats) of each of schedwatch's programs and of both floors, ns per run.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.common import (
    BENCH,
    Agent,
    Background,
    Config,
    Workload,
    build,
    measure,
    median,
    python,
    report_table,
    require,
    wait_for_line,
)
from bench.syscalls import bcc_tool
from tests.support.agent import only_collectors

FAMILIES_ONLY = tuple(only_collectors("syscall_families"))
PROGRAMS = ("syscall_families/sys_enter", "syscall_families/sys_exit")
FLOORS = {
    "empty raw_syscalls programs (floor)": "empty_raw_syscalls.bpf.c",
    "clock read only (floor of a timing program)": "clock_raw_syscalls.bpf.c",
}
BASELINE, EMPTY_FLOOR, CLOCK_FLOOR = "nothing attached", *FLOORS
CALLS = 2_000_000
WARM_UP_CALLS = 200_000  # a burst between two scrapes: far over the 100 calls/s that gets a workload timed
BPFTRACE_COUNTS = "tracepoint:raw_syscalls:sys_enter { @calls[cgroup, args->id] = count(); }"
BPFTRACE_TIMES = (
    "tracepoint:raw_syscalls:sys_enter { @calls[cgroup, args->id] = count(); @start[tid] = nsecs; } "
    "tracepoint:raw_syscalls:sys_exit /@start[tid]/ { @ns[cgroup, args->id] = sum(nsecs - @start[tid]); "
    "delete(@start[tid]); }"
)


def cgroup_root() -> Path:
    """The cgroup2 mount."""
    from agent.machine.cgroups.layout import read_layout

    unified = read_layout().unified
    if unified is None:
        raise SystemExit("bench families: needs a cgroup2 mount")
    return unified


def in_cgroup(group: Path, *command: str) -> list[str]:
    """*command* run as a process that first joins *group*."""
    return ["sh", "-c", f'echo $$ > {group}/cgroup.procs && exec "$@"', "in-cgroup", *command]


def getppid_loop(binary: Path, group: Path) -> Workload:
    return Workload(
        "getppid loop (CPU 1)", lambda n: in_cgroup(group, "taskset", "-c", "1", str(binary), "getppid", str(n)), CALLS
    )


class FamiliesAgent(Agent):
    """The agent with the syscall_families collector alone. With *timed*, the cgroup of that name is made timed before
    measuring (a burst of calls between two scrapes); every scrape chooses the timed set again, so nothing scrapes
    it until it stops, when one scrape checks that the set was as meant while the workload ran."""

    def __init__(self, binary: Path, groups: dict[str, Path], *flags: str, timed: str | None = None) -> None:
        super().__init__(*FAMILIES_ONLY, *flags)
        self.groups, self.timed = groups, timed
        if timed is None:
            return
        self.scrape()
        getppid_loop(binary, groups[timed]).run(divisor=CALLS // WARM_UP_CALLS)
        time.sleep(0.2)
        self.scrape()

    def scrape(self) -> str:
        """/metrics, as text."""
        with urllib.request.urlopen(self.url, timeout=10) as response:
            return str(response.read().decode())

    def stop(self) -> None:
        """Check the timed set (the gauges show the one chosen at the scrape before), then stop."""
        wrong = []
        if self.timed is not None:
            text, root = self.scrape(), cgroup_root()
            for name, group in self.groups.items():
                relative = "/" + str(group.relative_to(root))
                want = "1.0" if name == self.timed else "0.0"
                line = next(
                    (ln for ln in text.splitlines() if "syscall_timed{" in ln and f'cgroup="{relative}"' in ln), ""
                )
                if not line.endswith(f" {want}") and not (line == "" and want == "0.0"):  # "": no call seen
                    wrong.append(f"{name} should have been timed={want}; the agent says {line!r}")
        super().stop()
        if wrong:
            raise RuntimeError("bench families: " + "; ".join(wrong))

    def program_ns(self) -> dict[str, tuple[int, int]]:
        """(runs, run ns) of the agent's raw tracepoint programs by tracepoint, from its fdinfo (a scrape would choose
        the timed set again) and bpftool's list of links (which names the tracepoint each program is attached to)."""
        held = {}
        for fd in Path(f"/proc/{self.process.pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(fd) == "anon_inode:bpf-prog":
                    text = (fd.parent.parent / "fdinfo" / fd.name).read_text()
                    info = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
                    held[int(info["prog_id"])] = (int(info["run_cnt"]), int(info["run_time_ns"]))
        links = json.loads(subprocess.run(["bpftool", "-j", "link", "show"], capture_output=True, check=True).stdout)
        return {
            link["tp_name"]: held[link["prog_id"]]
            for link in links
            if link.get("type") == "raw_tracepoint" and link.get("prog_id") in held
        }


def configs(binary: Path, groups: dict[str, Path]) -> list[Config]:
    """Every configuration compared, baseline first, floors next."""
    floors = [
        Config(
            name,
            start=lambda source=source: Background(  # type: ignore[misc]
                [python(), "-m", "bench.floor", str(BENCH / source)], wait_for_line("ready")
            ),
        )
        for name, source in FLOORS.items()
    ]
    return [
        Config(BASELINE),
        *floors,
        Config(
            "schedwatch syscall_families, counts only (--syscall-timed-workloads 0)",
            start=lambda: FamiliesAgent(binary, groups, "--syscall-timed-workloads", "0"),
        ),
        Config(
            "schedwatch syscall_families, default, another workload timed",
            start=lambda: FamiliesAgent(binary, groups, timed="other"),
        ),
        Config(
            "schedwatch syscall_families, default, this workload timed",
            start=lambda: FamiliesAgent(binary, groups, timed="measured"),
        ),
        Config(
            "schedwatch syscall_families, --syscall-time all",
            start=lambda: FamiliesAgent(binary, groups, "--syscall-time", "all"),
        ),
        Config("syscount-bpfcc", start=lambda: bcc_tool("syscount-bpfcc", ready="Tracing syscalls")),
        Config("syscount-bpfcc -L", start=lambda: bcc_tool("syscount-bpfcc", "-L", ready="Tracing syscalls")),
        Config(
            "bpftrace: count per cgroup and syscall",
            start=lambda: Background(["bpftrace", "-e", BPFTRACE_COUNTS], wait_for_line("Attaching")),
        ),
        Config(
            "bpftrace: count and time per cgroup and syscall",
            start=lambda: Background(["bpftrace", "-e", BPFTRACE_TIMES], wait_for_line("Attaching")),
        ),
    ]


def agent_ns(
    binary: Path, groups: dict[str, Path], workload: Workload, *flags: str, timed: str | None = None
) -> dict[str, float]:
    """ns per run of the agent's two programs by the kernel's accounting, while *workload* runs once."""
    agent = FamiliesAgent(binary, groups, "--bpf-stats", *flags, timed=timed)
    try:
        before = agent.program_ns()
        workload.run()
        after = agent.program_ns()
    finally:
        agent.stop()
    costs = {}
    for program in PROGRAMS:
        name = program.split("/")[1]
        runs = after[name][0] - before[name][0]
        costs[program] = (after[name][1] - before[name][1]) / runs if runs else float("nan")
    return costs


def floor_ns(source: str, workload: Workload) -> dict[str, float]:
    """ns per run of the floor programs in *source*, by the same accounting."""
    from agent.bpf.compile import import_bcc
    from agent.bpf.stats import enable_bpf_stats, program_stats
    from agent.machine import kernel

    kernel.prepare_headers(kernel.find_kernel_headers(kernel.kernel_release(), os.environ), Path("/run/schedwatch"))
    stats_fd = enable_bpf_stats()
    program = import_bcc().BPF(src_file=str(BENCH / source).encode(), cflags=[f"-I{BENCH.parent}"])
    fds = {name.decode(): function.fd for name, function in program.funcs.items()}
    try:
        before = {s.program: s for s in program_stats(fds)}
        workload.run()
        after = {s.program: s for s in program_stats(fds)}
    finally:
        program.cleanup()
        os.close(stats_fd)
    return {
        f"floor/{name}": (after[name].run_seconds - before[name].run_seconds)
        / (after[name].runs - before[name].runs)
        * 1e9
        for name in ("sys_enter", "sys_exit")
    }


def run(repetitions: int) -> dict[str, Any]:
    """Measure everything; raw samples, medians, and the kernel's per-run accounting."""
    require("syscount-bpfcc", "bpftrace", "bpftool", "taskset", "gcc")
    binary = build("loops")
    root = cgroup_root()
    groups = {name: root / f"schedwatch-bench-families-{name}" for name in ("measured", "other")}
    for group in groups.values():
        group.mkdir(exist_ok=True)
    workload = getppid_loop(binary, groups["measured"])
    try:
        samples = measure(configs(binary, groups), [workload], repetitions)
        accounting: dict[str, dict[str, list[float]]] = {}
        agent_runs = {
            "counts only": (("--syscall-timed-workloads", "0"), None),
            "another workload timed": ((), "other"),
            "this workload timed": ((), "measured"),
            "--syscall-time all": (("--syscall-time", "all"), None),
        }
        for _ in range(repetitions):
            for name, (flags, timed) in agent_runs.items():
                for program, ns in agent_ns(binary, groups, workload, *flags, timed=timed).items():
                    accounting.setdefault(name, {}).setdefault(program, []).append(ns)
            for name, source in FLOORS.items():
                for program, ns in floor_ns(source, workload).items():
                    accounting.setdefault(name, {}).setdefault(program, []).append(ns)
    finally:
        for group in groups.values():
            group.rmdir()
    medians = {config: {w: median(v) for w, v in values.items()} for config, values in samples.items()}
    return {"repetitions": repetitions, "samples": samples, "medians": medians, "accounting": accounting}


def report(result: dict[str, Any]) -> str:
    """The medians table against nothing attached and the clock-only floor, then the per-run accounting."""
    lines = [
        f"Median of {result['repetitions']} runs; ns per getppid call (added ns over nothing attached; x the "
        "clock-only floor's added ns)",
        "",
        *report_table(result["medians"], BASELINE, CLOCK_FLOOR),
        "",
        f"Kernel accounting (--bpf-stats), ns per program run, median of {result['repetitions']} (every run in "
        "brackets; the accounting's own cost included):",
        "",
    ]
    for config, programs in result["accounting"].items():
        cells = []
        for program, values in programs.items():
            runs = ", ".join(f"{v:.0f}" for v in values)
            cells.append(f"`{program.split('/')[-1]}` {median(values):.0f} ns ({runs})")
        lines.append(f"- {config}: " + "; ".join(cells))
    return "\n".join(lines)
