"""What the kernel's verifier said when it refused a program: read from the output bcc writes in the loader child.

bcc prints ``bpf: Failed to load program: <errno>`` and then the verifier's log: the instructions it walked, and
before ``processed N insns`` the reason it stopped. The reason and the instruction it stopped at are what a person
(or a bug report) needs; the last lines of the log are kept for the log file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FAILED = "bpf: Failed to load program"
TAIL_LINES = 25  # of the verifier's log, kept with the error (the 6.1 refusal of sched.bpf.c needed the last 8)
_INSTRUCTION = re.compile(r"^(\d+): \([0-9a-f]{2}\) (.*)$")
_PROCESSED = re.compile(r"^processed \d+ insns")


@dataclass(frozen=True)
class Refusal:
    """Why the verifier refused a program, in one line, and the last lines of its log."""

    reason: str  # e.g. "R1 invalid mem access 'scalar' (at instruction 2: r1 = *(u64 *)(r1 +0))"
    tail: str  # the log's last TAIL_LINES lines, up to "processed N insns"


def refusal(output: str) -> Refusal | None:
    """The verifier's refusal in the loader's *output*; None when the output holds no verifier log."""
    lines = output.splitlines()
    starts = [index for index, line in enumerate(lines) if line.startswith(FAILED)]
    if not starts:
        return None
    log = lines[starts[-1] + 1 :]
    end = next((index for index, line in enumerate(log) if _PROCESSED.match(line)), None)
    if end is not None:
        log = log[: end + 1]
    body = log[:end] if end is not None else log
    reasons: list[str] = []
    instruction = ""
    for line in reversed(body):
        matched = _INSTRUCTION.match(line)
        if matched:
            number, text = matched.groups()
            instruction = f"{number}: {text.split(' ; ')[0].strip()}"
            break
        if line.strip() and not line.startswith(";"):
            reasons.insert(0, line.strip())
    if not reasons:
        return None
    where = f" (at instruction {instruction})" if instruction else ""
    return Refusal("; ".join(reasons) + where, "\n".join(log[-TAIL_LINES:]))
