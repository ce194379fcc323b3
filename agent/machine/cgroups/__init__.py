"""cgroup facts of this machine, one job a module: which hierarchies are mounted and where a process is in
them (layout), cgroup2 id -> path (paths), reading a cgroup's files (files), and its CPU limits and use (cpu).
"""
