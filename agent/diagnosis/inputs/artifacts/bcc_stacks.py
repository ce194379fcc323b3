"""bcc's stack-counting tools: ``stackcount`` (how often each stack reached a traced function or tracepoint),
``profile`` (on-CPU stacks sampled at a rate) and ``offcputime``: per stack its frames, innermost first (``--``
between the kernel's and the user's), with ``-v``/``-a`` their addresses, the process (``comm [pid]`` or ``-  comm
(pid)``) and the count on a line of its own. The tool's banner names the probe or the sampling. ``[...]`` elisions,
prompts, a count pasted in Markdown bold (``**524286**``) and a stack cut short are read past. From a public thread
(iovisor/bcc#617)::

    # ./profile.py -s 11
    Sampling at 49 Hertz of all threads by user + kernel stack... Hit Ctrl-C to end.
        ffffffff8103663e default_idle
        ffffffff81036dbf arch_cpu_idle
        --
        -                swapper/2 (0)
            57

>>> from agent.diagnosis.inputs.artifacts.text import docstring_sample
>>> report = parse(docstring_sample(__doc__))
>>> stack = report.stacks[0]
>>> (report.tool, stack.count, stack.comm, stack.frames[0].function, stack.frames[0].library)
('profile', 57, 'swapper/2', 'default_idle', '[kernel]')

Facts (:func:`to_facts`): of ``profile`` the innermost frames as on-CPU samples and the callers of sched_yield and
futex waits; of ``stackcount`` on sched_yield or futex (the probe in the banner, or every stack ending in the call)
the callers of those calls; of other probes and of ``offcputime`` nothing but a note (stacks that reached a
function, or off-CPU time, are not CPU samples). bcc prints a user frame's library only with ``-v``; without it
the caller's library is unknown and is not named.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from agent.diagnosis.facts import NodeView, Workload, WorkloadView
from agent.diagnosis.inputs.artifacts import code, sampled, stack_classes
from agent.diagnosis.inputs.artifacts.errors import NotThisFormat
from agent.diagnosis.inputs.artifacts.frames import Frame
from agent.diagnosis.inputs.artifacts.part import Part
from agent.diagnosis.inputs.artifacts.text import lines, unquoted

__all__ = ["FORMAT", "BccStack", "BccStacks", "looks_like", "looks_like_error", "parse", "to_facts"]

FORMAT = "bcc stacks"

_TRACING = re.compile(r'^Tracing \d+ functions? for "(?P<probe>[^"]+)"')
_SAMPLING = re.compile(r"^Sampling at \d+ Hertz of .* by (?P<which>user \+ kernel|kernel|user) stack")
_OFFCPU = re.compile(r"^Tracing off-CPU time")
_COUNT = re.compile(r"^(?:\*\*)?(?P<count>\d+)(?:\*\*)?$")
_PROFILE_PROCESS = re.compile(r"^- +(?P<comm>.+?) \((?P<pid>\d+)\)$")
_STACKCOUNT_PROCESS = re.compile(r"^(?P<comm>\S.*?) \[(?P<pid>\d+)\]$")
_FRAME = re.compile(r"^(?:(?P<address>[0-9a-f]{6,16}) +)?(?P<symbol>\S.*?)(?: \[(?P<module>[^\[\]]+)\])?$")
_BYTES = re.compile(r"^b'(?P<name>.*)'$")
_NOISE = re.compile(r"^(?:\^C|Detaching\.\.\.|WARNING: .*|\[\.\.\.\]|\.\.\.|…|usage: .*|#.*|\$ .*)$")
# Names of kernel code a sampled stack without a system call entry starts with (interrupts, the scheduler, futexes)
_KERNEL_NAME = re.compile(r"^(?:__x64_sys_|__se_sys_|do_syscall|syscall_|exit_to_user|__?schedule|schedule_|"
                          r"finish_task_switch|try_to_wake_up|wake_up|futex_|__futex|do_futex|__rseq|irq|__irq|asm_|"
                          r"sysvec_|native_|_raw_spin|hrtimer|tick_|__softirq|do_softirq|__do_softirq|ret_from_fork|"
                          r"kthread|worker_thread|cpu_startup_entry|do_idle|default_idle|cpuidle|arch_cpu_idle|"
                          r"update_|__update|rcu_|perf_|__perf|sched_|ttwu_|enqueue_|dequeue_|pick_next|"
                          r"put_prev)")  # fmt: skip
_ENTRY = re.compile(r"^(?:entry_SYSCALL|entry_SYSENTER|entry_INT80|el0_svc|system_call|ret_from_fork|kthread$)")
KERNEL_SPACE = 0xFFFF800000000000


@dataclass(frozen=True)
class BccStack:
    """One stack: frames innermost first, the process where the tool printed it, and its count."""

    frames: tuple[Frame, ...]
    count: int
    comm: str | None = None
    pid: int | None = None


@dataclass(frozen=True)
class BccStacks:
    """The stacks of one run, which tool made them and on what probe, and what was read past."""

    tool: str | None  # "stackcount", "profile", "offcputime"; None when no banner was pasted
    probe: str | None  # stackcount's probe (``t:syscalls:sys_enter_sched_yield``)
    stacks: tuple[BccStack, ...]
    skipped: int
    cut: int  # frames after the last count (a stack cut short)


def _rows(text: str) -> list[str]:
    return [" ".join(unquoted(line.text).split()) for line in lines(text)]


def _banner(rows: list[str]) -> tuple[str | None, str | None, str | None]:
    """(tool, probe, which stacks profile sampled) from the banner line."""
    for row in rows:
        if match := _TRACING.match(row):
            return "stackcount", match["probe"], None
        if match := _SAMPLING.match(row):
            return "profile", None, match["which"]
        if _OFFCPU.match(row):
            return "offcputime", None, None
    return None, None, None


def looks_like(text: str) -> bool:
    """True when *text* has a bcc banner and a count after frames, or two such stacks with their processes."""
    rows = [row for row in _rows(text) if row]
    counts = processes = 0
    framed = False
    for row in rows:
        if _COUNT.match(row):
            counts += 1 if framed else 0
            framed = False
        elif _PROFILE_PROCESS.match(row) or _STACKCOUNT_PROCESS.match(row):
            processes += 1
        elif not _NOISE.match(row) and _FRAME.match(row):
            framed = True
    tool = _banner(rows)[0]
    return counts >= 1 and (tool is not None or processes >= 1)


def looks_like_error(text: str) -> bool:
    """bcc's failures to attach (no such function, no tracepoint) or to run (not root)."""
    first = next((row for row in _rows(text) if row and not row.startswith(("#", "$"))), "")
    return first.startswith(("Exception: No functions matched", "could not determine address of symbol")) or (
        first.startswith("Traceback (most recent call last)") and "bcc" in text
    )


def _kernel_by_address(address: str | None) -> bool | None:
    return None if address is None else int(address, 16) >= KERNEL_SPACE


def _stack(rows: list[str], count: int, kernel_first: bool | None, kernel_probe: bool, tool: str | None) -> BccStack:
    comm = pid = None
    parsed: list[tuple[str | None, str, str | None, bool | None]] = []
    delimited = "--" in rows
    user_part = False
    for row in rows:
        if row == "--":
            user_part = True
            continue
        if (process := _PROFILE_PROCESS.match(row) or _STACKCOUNT_PROCESS.match(row)) is not None:
            raw = _BYTES.match(process["comm"])
            comm, pid = raw["name"] if raw else process["comm"], int(process["pid"])
            continue
        frame = _FRAME.match(row)
        if frame is None:
            continue
        symbol = frame["symbol"]
        if (raw := _BYTES.match(symbol)) is not None:
            symbol = raw["name"]
        side = _kernel_by_address(frame["address"])
        if side is None and delimited:
            side = not user_part
        parsed.append((frame["module"], symbol, frame["address"], side))
    if any(side is None for *_rest, side in parsed):
        # No addresses and no delimiter: the banner says which stacks; else the kernel's frames come first, up to
        # the system call's entry (or, without one, while they have kernel names), then the user's; a kernel probe's
        # stacks are all the kernel's.
        entry = next((i for i, (_m, symbol, _a, _s) in enumerate(parsed) if _ENTRY.match(symbol)), None)
        if entry is None and not kernel_probe:
            entry = -1
        elif entry is None and kernel_first is None and tool == "profile":
            entry = next((i for i, (_m, symbol, _a, _s) in enumerate(parsed) if not _KERNEL_NAME.match(symbol)), 0) - 1
        sides = [
            kernel_first if kernel_first is not None else (i <= entry if entry is not None else kernel_probe)
            for i in range(len(parsed))
        ]
        parsed = [(m, s, a, side if side is not None else sides[i]) for i, (m, s, a, side) in enumerate(parsed)]
    frames = tuple(
        Frame(code.function(symbol), code.KERNEL if side else code.library(module))
        for module, symbol, _address, side in parsed
    )
    return BccStack(frames, count, comm, pid)


def parse(text: str) -> BccStacks:
    """The stacks in *text*; raises NotThisFormat (see .errors)."""
    if not looks_like(text):
        raise NotThisFormat(FORMAT, "no bcc stacks (frames, then `-  comm (pid)` or `comm [pid]`, then a count)")
    rows = _rows(text)
    tool, probe, which = _banner(rows)
    kernel_first = {"kernel": True, "user": False}.get(which or "")
    kernel_probe = probe is None or not probe.startswith(("u:", "c:", "p:/", "uprobe:"))
    stacks: list[BccStack] = []
    block: list[str] = []
    skipped = 0
    for row in rows:
        if not row:
            continue
        if _TRACING.match(row) or _SAMPLING.match(row) or _OFFCPU.match(row):
            skipped += 1 + len(block)  # what came before the banner is the command that printed it
            block = []
        elif _NOISE.match(row):
            skipped += 1
        elif (count := _COUNT.match(row)) is not None and block:
            stacks.append(_stack(block, int(count["count"]), kernel_first, kernel_probe, tool))
            block = []
        else:
            block.append(row)
    return BccStacks(tool, probe, tuple(stacks), skipped, len(block))


def _call_of(report: BccStacks) -> str | None:
    """``sched_yield`` or ``futex`` when the stacks are calls of it: by the probe, or by every stack's innermost
    frame."""
    if report.tool == "stackcount" and report.probe:
        return "sched_yield" if "sched_yield" in report.probe else "futex" if "futex" in report.probe else None
    if report.tool is None and report.stacks:
        leaves = [stack.frames[0] for stack in report.stacks if stack.frames]
        if leaves and all(sampled.is_yield(frame) or "sched_yield" in (frame.function or "") for frame in leaves):
            return "sched_yield"
        if leaves and all("futex" in (frame.function or "") for frame in leaves):
            return "futex"
    return None


BLOCKED_KINDS = {"futex": "futex", "lock": "futex", "allocator-lock": "futex", "io": "io", "sleep": "sleep"}


def _off_cpu(report: BccStacks) -> WorkloadView:
    """offcputime's stacks as time: blocked by what they wait on (futex, io, sleep), and preempted (runnable, off a
    CPU: the run queue's share)."""
    blocked: dict[str, float] = {}
    preempted = 0.0
    for stack in report.stacks:
        leaf = stack_classes.leaf_and_owner(stack.frames)[0]
        seconds = stack.count / 1e6
        if leaf == "preempted":
            preempted += seconds
        elif leaf in BLOCKED_KINDS:
            blocked[BLOCKED_KINDS[leaf]] = blocked.get(BLOCKED_KINDS[leaf], 0.0) + seconds
    return WorkloadView(ref=Workload(), blocked_by_kind=blocked or None, preempted_seconds=preempted)


def to_facts(report: BccStacks, source: str) -> Part:
    """On-CPU samples and call sites of profile; call sites of stackcount on sched_yield or futex."""
    counted = [sampled.Counted(stack.frames, float(stack.count)) for stack in report.stacks if stack.frames]
    total = float(sum(stack.count for stack in report.stacks))
    notes = [f"{source}: {len(report.stacks)} stacks of {report.tool or 'a bcc tool'} ({total:g} counted); how "
             "long it ran is not in them"]  # fmt: skip
    workload = WorkloadView(ref=Workload())
    call = _call_of(report)
    if report.tool == "profile":
        yield_sites, futex_sites = sampled.call_sites(counted)
        workload = WorkloadView(
            ref=Workload(),
            cpu_samples=sampled.leaf_samples(counted),
            cpu_samples_total=total or None,
            yield_sites=yield_sites,
            futex_sites=futex_sites,
        )
    elif call == "sched_yield":
        workload = WorkloadView(ref=Workload(), yield_sites=sampled.sites_of_call(counted, sampled.is_yield))
    elif call == "futex":
        workload = WorkloadView(ref=Workload(), futex_sites=sampled.sites_of_call(counted, sampled.is_futex))
    elif report.tool == "offcputime":
        workload = _off_cpu(report)
        notes.append(f"{source}: off-CPU time by stack (microseconds), read as time blocked by what the stacks wait on")
    else:
        what = f"calls of {report.probe}" if report.probe else "events of an unnamed probe"
        notes.append(f"{source}: {what} by stack: which paths reach it, not where CPU time goes")
    unit = {"profile": "samples", "offcputime": "off-CPU seconds"}.get(report.tool or "", "calls")
    scale = 1e-6 if report.tool == "offcputime" else 1.0
    classified = stack_classes.classify(
        (stack_classes.Counted(stack.frames, stack.count * scale) for stack in report.stacks), unit
    )
    workload = dataclasses.replace(workload, stacks=classified)
    by_process: dict[str, int] = {}
    for stack in report.stacks:
        if stack.comm is not None:
            by_process[stack.comm] = by_process.get(stack.comm, 0) + stack.count
    if by_process:
        busiest = sorted(by_process.items(), key=lambda item: -item[1])[:5]
        notes.append(f"{source}: counted by process (busiest: {', '.join(f'{comm} {n}' for comm, n in busiest)})")
    if report.cut:
        notes.append(f"{source}: the last stack, cut short before its count, was skipped")
    if report.skipped:
        notes.append(f"{source}: {report.skipped} lines of the tool's banner, prompts and elisions skipped")
    return Part(FORMAT, source, NodeView(), workload=workload, notes=tuple(notes))
