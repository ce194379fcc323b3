"""The BPF wing: the agent's kernel programs (C sources in ``bpf/`` of the checkout, installed as
:mod:`agent.bpf.programs`), compiled and attached by a short-lived child, then used without bcc.

The agent never imports bcc (whose LLVM alone is ~50 MB of resident memory): :mod:`.loader` compiles
(:mod:`.compile`) and attaches a program in a child process and hands its maps, programs and attachments over a
Unix socket (:mod:`.handover`); the agent then reads the maps with the bpf(2) syscall (:mod:`.maps`,
:mod:`.syscall`, :mod:`.layouts`), consumes ring buffers itself (:mod:`.ringbuf`) and reads the kernel's accounting
of the programs' cost (:mod:`.stats`). :mod:`.probes` has one module per program family.
"""


class BpfUnavailable(RuntimeError):
    """bcc cannot be imported or a program cannot be compiled, loaded or attached."""

    def __init__(self, message: str, verifier_log: str = "", fix: str = "") -> None:
        super().__init__(message)
        self.verifier_log = verifier_log  # the last lines of the verifier's log when it refused the program
        self.fix = fix  # what to do, where the failure says it ("": the caller's general advice)
