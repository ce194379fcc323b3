"""Live facts for `schedwatch diagnose`: node CPU states, processes, pool workers, thread-pool libraries, and the
allow-listed thread variables of a process's environment."""
