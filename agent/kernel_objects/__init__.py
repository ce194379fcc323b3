"""BPF programs and maps held as plain file descriptors: loaded by a short-lived child, used without bcc.

The agent never imports bcc (whose LLVM alone is ~50 MB of resident memory): :mod:`.loader` compiles and
attaches a program in a child process and hands its maps, programs and attachments over a Unix socket
(:mod:`.handover`); the agent then reads the maps with the bpf(2) syscall (:mod:`.maps`, :mod:`.syscall`) and
consumes ring buffers itself (:mod:`.ringbuf`).
"""
