"""What this machine is and allows: kernel, tracefs and headers, cgroups, /proc, CPUs."""
