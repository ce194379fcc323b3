"""One module per probe family: each loads its BPF program and turns its maps into plain snapshots."""
