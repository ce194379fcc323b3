"""Code addresses to names: which library (a process's /proc/PID/maps) and which function (the library's ELF symbol
table, cached per build id; the kernel's /proc/kallsyms) an address of a sample or a call site is in.

Addresses are never exported or logged: only the names made of them leave this room.
"""
