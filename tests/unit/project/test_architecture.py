"""The rule docs/architecture.md states, checked on the code: imports run one way, down the floors of the house,
and no two rooms import each other (directly or round a cycle).

Every module under agent/ is parsed with ``ast`` (imports inside functions and under TYPE_CHECKING count too: they
are dependencies all the same), and each import is an edge between modules. A room is a wing of ``agent/`` (its
package or module: ``agent/collectors/``, ``agent/metrics.py``); inside diagnosis each sub-package or module is a
room of its own, on floors of their own, and so is each sub-package of ``diagnosis/inputs/`` (live, processes,
artifacts). A room may import rooms on its floor or below, never above; the rules import only the facts, the findings
and the pool and allocator tables.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterable
from pathlib import Path

from tests.support.agent import REPO

AGENT = REPO / "agent"

# The wings of agent/, top floor first. "agent" is the package itself (agent/__init__.py: the version).
FLOORS = {
    **dict.fromkeys(("__main__", "cli", "commands"), 5),
    # assembly: the wiring the commands and verify share (it starts collectors; nothing below imports it)
    **dict.fromkeys(("assembly", "exporter", "web", "verification", "diagnosis"), 4),
    "top": 4,  # schedwatch top's view: rows from two readings of the series (agent/series/), drawn with rich
    # collectors; series: the one reader of schedwatch's own series, for the diagnosis, top, verify and the fleet
    **dict.fromkeys(("collectors", "series"), 3),
    # tables: what each collector exports, row by row; config counts the kernel memory of its --max-* flags from them
    **dict.fromkeys(("bpf", "counters", "identity", "symbols", "tables", "config"), 2),
    **dict.fromkeys(("exposition", "metrics", "model"), 1),
    **dict.fromkeys(("machine", "log", "memory", "agent"), 0),
}
# Inside diagnosis: renderers and the agent's standing findings on top, then the live inputs (which read the agent's
# series and, for flagged workloads, their processes) and the comparison of reports, then the rules and the inputs
# that read processes and artifacts, what the rules conclude, and the facts they read. Each sub-package or module of
# inputs/ is a room ("inputs.live", "inputs.told"); "inputs" is agent/diagnosis/inputs/__init__.py, "diagnosis"
# agent/diagnosis/__init__.py.
DIAGNOSIS_FLOORS = {
    **dict.fromkeys(("render", "standing"), 4),
    **dict.fromkeys(("inputs.live", "comparison"), 3),
    **dict.fromkeys(("rules", "inputs.processes", "inputs.artifacts", "inputs.told", "inputs"), 2),
    "findings": 1,
    **dict.fromkeys(("facts", "pools", "allocators", "diagnosis"), 0),
}
RULES_MAY_IMPORT = frozenset({"diagnosis.facts", "diagnosis.findings", "diagnosis.pools", "diagnosis.allocators"})

# Violations other branches are removing now. The lead empties this set as they merge; an entry that no longer
# occurs fails the test as surely as a new violation does, so the set cannot outlive the fix.
KNOWN_UNTIL_MERGED: frozenset[str] = frozenset()

Edge = tuple[str, str]  # (importing module, imported module)


def modules() -> dict[str, Path]:
    """Every module of the agent by dotted name (a package by its own name)."""
    found = {}
    for path in sorted(AGENT.rglob("*.py")):
        parts = path.relative_to(AGENT.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports(known: dict[str, Path]) -> set[Edge]:
    """Each import of an agent module by an agent module (the module named, or the package it names a part of)."""
    edges: set[Edge] = set()
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                # `from agent import metrics` imports a module; `from agent.model import Labels` a name of one.
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
            for target in targets:
                if target == "agent" or target.startswith("agent."):
                    edges.add((name, nearest_module(target, known)))
    return {(source, target) for source, target in edges if source != target}


def nearest_module(name: str, known: dict[str, Path]) -> str:
    while name not in known:
        name = name.rpartition(".")[0]
    return name


def wing(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "agent"


def diagnosis_room(module: str) -> str:
    """The room of a module of the diagnosis wing: its sub-package or module ("rules"), a sub-package of inputs/
    ("inputs.live"), "diagnosis" for the package itself."""
    parts = module.split(".")
    if len(parts) > 3 and parts[2] == "inputs":
        return f"inputs.{parts[3]}"
    return parts[2] if len(parts) > 2 else "diagnosis"


def room(module: str) -> str:
    return f"diagnosis.{diagnosis_room(module)}" if wing(module) == "diagnosis" else wing(module)


def violations(edges: Iterable[Edge]) -> set[str]:
    """Every import that runs up a floor, every import of a rule beyond what rules may read, every cycle of rooms."""
    found = set()
    rooms: dict[str, set[str]] = {}
    for source, target in edges:
        if room(source) != room(target):
            rooms.setdefault(room(source), set()).add(room(target))
        if wing(source) != wing(target):
            up, down = FLOORS[wing(source)], FLOORS[wing(target)]
            where = f"{wing(source)} {up} -> {wing(target)} {down}"
        elif wing(source) == "diagnosis" and diagnosis_room(source) != diagnosis_room(target):
            up, down = DIAGNOSIS_FLOORS[diagnosis_room(source)], DIAGNOSIS_FLOORS[diagnosis_room(target)]
            where = f"{room(source)} {up} -> {room(target)} {down}"
            if room(source) == "diagnosis.rules" and room(target) not in RULES_MAY_IMPORT:
                found.add(f"rules read beyond facts and findings: {source} -> {target}")
        else:
            continue
        if down > up:
            found.add(f"upward: {source} -> {target} ({where})")
    found |= {"cycle: " + " -> ".join(cycle) for cycle in cycles(rooms)}
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each group of rooms that reach each other (Tarjan's strongly connected components), shown
    from its alphabetically first room."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_cycle_in(group, graph) for group in groups]


def _cycle_in(group: set[str], graph: dict[str, set[str]]) -> list[str]:
    """A shortest cycle through the first room of *group* (breadth first inside the group)."""
    start = min(group)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph.get(node, set()) & group):
                if nxt == start:
                    return [*paths[node], start]
                if nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle through {start}")


def test_every_room_of_the_house_is_on_a_floor() -> None:
    found = modules()
    unplaced_wings = {wing(name) for name in found} - FLOORS.keys()
    unplaced_rooms = {diagnosis_room(name) for name in found if wing(name) == "diagnosis"} - DIAGNOSIS_FLOORS.keys()
    assert not unplaced_wings, f"put these wings on a floor in FLOORS (and in docs/architecture.md): {unplaced_wings}"
    assert not unplaced_rooms, f"put these diagnosis rooms on a floor in DIAGNOSIS_FLOORS: {unplaced_rooms}"


def test_the_import_graph_is_read_from_the_code() -> None:
    edges = imports(modules())
    assert ("agent.collectors.syscalls", "agent.bpf.probes.syscalls") in edges  # from agent.x import Name
    assert ("agent.exporter", "agent.metrics") in edges  # from agent import module
    assert ("agent.exporter", "agent") in edges  # from agent import __version__
    assert ("agent.collectors", "agent.collectors.sched") in edges  # imported inside a function
    assert len(edges) > 400, len(edges)  # 441 when this was written


def test_no_import_runs_back_up_and_no_rooms_import_each_other() -> None:
    found = violations(imports(modules()))
    new = sorted(found - KNOWN_UNTIL_MERGED)
    fixed = sorted(KNOWN_UNTIL_MERGED - found)
    assert not new, "imports against docs/architecture.md's rule:\n" + "\n".join(new)
    assert not fixed, "no longer found: remove from KNOWN_UNTIL_MERGED:\n" + "\n".join(fixed)


def test_the_check_finds_an_upward_import_a_rule_reading_elsewhere_and_a_cycle() -> None:
    edges = {
        ("agent.machine.procfs", "agent.collectors.common"),  # floor 0 -> 3
        ("agent.diagnosis.rules.pool", "agent.diagnosis.inputs.live.window"),  # rules -> inputs
        ("agent.counters.perf_events", "agent.identity.labels"),  # counters -> identity -> counters: same floor
        ("agent.identity.placement", "agent.counters.cgroup_tree"),
        ("agent.collectors.sched", "agent.bpf.probes.sched"),  # allowed
        # inside inputs/: the live inputs may read processes, never the other way round
        ("agent.diagnosis.inputs.live.details", "agent.diagnosis.inputs.processes.workload"),  # allowed
        ("agent.diagnosis.inputs.processes.census", "agent.diagnosis.inputs.live.gather"),
    }
    assert violations(edges) == {
        "upward: agent.machine.procfs -> agent.collectors.common (machine 0 -> collectors 3)",
        "upward: agent.diagnosis.rules.pool -> agent.diagnosis.inputs.live.window (diagnosis.rules 2 -> "
        "diagnosis.inputs.live 3)",
        "rules read beyond facts and findings: agent.diagnosis.rules.pool -> agent.diagnosis.inputs.live.window",
        "cycle: counters -> identity -> counters",
        "upward: agent.diagnosis.inputs.processes.census -> agent.diagnosis.inputs.live.gather "
        "(diagnosis.inputs.processes 2 -> diagnosis.inputs.live 3)",
        "cycle: diagnosis.inputs.live -> diagnosis.inputs.processes -> diagnosis.inputs.live",
    }


def floor_table(heading: str) -> dict[str, int]:
    """The rooms (the names in backquotes) of the first table after *heading* in docs/architecture.md, by floor."""
    text = (AGENT.parent / "docs" / "architecture.md").read_text().split(heading, 1)[1]
    lines = text.splitlines()
    first = next(index for index, line in enumerate(lines) if line.startswith("|"))
    found = {}
    for row in itertools.takewhile(lambda line: line.startswith("|"), lines[first + 2 :]):
        floor, rooms = row.strip("|").split("|")[:2]
        found |= {name.rstrip("/").replace("/", "."): int(floor) for name in re.findall(r"`([^`]+)`", rooms)}
    return found


def test_docs_architecture_draws_the_floors_this_test_checks() -> None:
    assert floor_table("## Floors") == FLOORS
    assert floor_table("Inside `diagnosis/` each sub-package") == DIAGNOSIS_FLOORS


def command_modules(known: dict[str, Path]) -> set[str]:
    """The modules of agent/commands/ that define a subcommand (``COMMAND = Command(...)``)."""
    found = set()
    for name, path in known.items():
        if name.startswith("agent.commands.") and path.name != "__init__.py":
            tree = ast.parse(path.read_text(), str(path))
            assigned = {
                target.id
                for node in tree.body
                if isinstance(node, ast.Assign)
                for target in node.targets
                if isinstance(target, ast.Name)
            }
            if "COMMAND" in assigned:
                found.add(name)
    return found


def commands_importing_commands(edges: Iterable[Edge], commands: set[str]) -> set[str]:
    """Each import of one command module by another: what two commands share lives in a module of its own."""
    return {f"{source} -> {target}" for source, target in edges if source in commands and target in commands}


def test_no_command_imports_another() -> None:
    known = modules()
    commands = command_modules(known)
    assert {"agent.commands.run", "agent.commands.diagnose", "agent.commands.top"} <= commands, commands
    found = commands_importing_commands(imports(known), commands)
    assert not found, (
        "a command imports another (move what they share into a module of agent/commands/ or below):\n"
        + ("\n".join(sorted(found)))
    )


def test_the_command_check_finds_a_command_importing_another() -> None:
    commands = {"agent.commands.top", "agent.commands.diagnose"}
    edges = {("agent.commands.top", "agent.commands.diagnose"), ("agent.commands.top", "agent.commands.sources")}
    assert commands_importing_commands(edges, commands) == {"agent.commands.top -> agent.commands.diagnose"}


def test_unit_tests_mirror_the_rooms_of_the_agent() -> None:
    # Besides the agent's rooms: the project's own tests, the recorded inputs, and bytecode caches.
    outside_the_agent = {"project", "fixtures", "__pycache__"}
    unit = REPO / "tests" / "unit"
    folders = [
        path for path in unit.rglob("*") if path.is_dir() and not outside_the_agent & set(path.relative_to(unit).parts)
    ]
    assert folders, "tests/unit/ has folders"
    orphans = [str(path.relative_to(unit)) for path in folders if not (AGENT / path.relative_to(unit)).is_dir()]
    assert orphans == [], f"unit-test folders that name no room of agent/: {orphans}"
    loose = [path.name for path in unit.glob("test_*.py") if (AGENT / path.stem.removeprefix("test_")).is_dir()]
    assert loose == [], f"tests of a room of agent/ belong in its folder: {loose}"
