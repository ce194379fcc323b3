"""What a report leads with, in words both the terminal and the page draw: which side is slow, the fix as lines ready
to paste, and the inputs.

The renderers put these first (then the evidence and the details, each once): a reader who stops after the first
screen knows the answer, its fix and what it was made from.
"""

from __future__ import annotations

from agent.diagnosis.comparison import Comparison
from agent.diagnosis.findings import Diagnosis, Finding, Fix


def ready_lines(fix: Fix) -> list[tuple[str, str]]:
    """The fix's variables as lines to paste, by where they go: ``("Docker", "-e OMP_NUM_THREADS=2 ...")``; none
    when the fix has no values (it gives the formula instead)."""
    if not fix.variables:
        return []
    pairs = list(fix.variables.items())
    return [
        ("Docker", " ".join(f"-e {name}={value}" for name, value in pairs)),
        ("Kubernetes", "env: [" + ", ".join(f'{{name: {name}, value: "{value}"}}' for name, value in pairs) + "]"),
        ("shell", "export " + " ".join(f"{name}={value}" for name, value in pairs)),
    ]


def slow_line(comparison: Comparison) -> str:
    """Which side is slow, by how much where the inputs tell, how that is known and what would tell the rest."""
    slower = comparison.slower
    if slower.side is None:
        why = f" ({slower.basis})" if slower.basis else ""
        would = f": {slower.would_tell} would" if slower.would_tell else ""
        return f"The inputs do not say which side is slower{why}{would}."
    if slower.factor is not None:
        return f"{slower.side} is slower, {slower.factor:.1f}x ({slower.basis})."
    return (
        f"{slower.side} is the slow side: {slower.basis}. By how much these inputs do not say: {slower.would_tell} "
        "would."
    )


def cause_title(finding: Finding) -> str:
    """cause / mechanism."""
    return f"{finding.cause.value} / {finding.mechanism.value}"


def inputs_of(diagnosis: Diagnosis) -> str:
    """The inputs of one diagnosis, as one line."""
    return "; ".join(diagnosis.facts.sources) or "none named"


def shared_notes(comparison: Comparison) -> list[str]:
    """The notes of both sides, each once: a note only one side has says whose it is."""
    notes_a, notes_b = comparison.a.facts.notes, comparison.b.facts.notes
    merged: list[str] = []
    for note in notes_a:
        merged.append(note if note in notes_b else f"{comparison.a_name}: {note}")
    merged.extend(f"{comparison.b_name}: {note}" for note in notes_b if note not in notes_a)
    return list(dict.fromkeys(merged))
