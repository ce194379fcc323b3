"""The verifier's reason for refusing a program, read from what bcc wrote when the real verifier refused one, and the
fix the owner of "can BPF run here" gives for it."""

from __future__ import annotations

from agent.bpf import BpfUnavailable
from agent.bpf.verifier import refusal
from agent.collectors.common.availability import LOAD_FIX, VERIFIER_FIX, load_failure
from tests.unit.locations import UNIT_FIXTURES

REFUSED = (UNIT_FIXTURES / "bpf" / "verifier-refused-sched-6.18.txt").read_text()


def test_the_reason_is_the_verifiers_last_words_at_the_instruction_it_stopped() -> None:
    refused = refusal(REFUSED)
    assert refused is not None
    assert refused.reason == "R1 invalid mem access 'scalar' (at instruction 2: r1 = *(u64 *)(r1 +0))"
    assert refused.tail.splitlines()[0] == "0: R1=ctx() R10=fp0"
    assert refused.tail.splitlines()[-1].startswith("processed 3 insns")


def test_output_without_a_verifier_log_is_no_refusal() -> None:
    compile_error = "/virtual/main.c:390:28: error: use of undeclared identifier 'DEAD_MASK'\n1 error generated.\n"
    assert refusal(compile_error) is None
    assert refusal("") is None


def test_a_refused_program_is_reported_as_a_defect_and_a_compile_error_as_a_headers_question() -> None:
    refused = load_failure(BpfUnavailable("cannot load sched.bpf.c: the kernel's verifier refused it", "0: ..."))
    assert not refused.ok and refused.fix == VERIFIER_FIX
    assert load_failure(BpfUnavailable("cannot load sched.bpf.c: Failed to compile")).fix == LOAD_FIX
    missing = BpfUnavailable("bcc cannot be imported", fix="apt-get install python3-bpfcc")
    assert load_failure(missing).fix == "apt-get install python3-bpfcc"
