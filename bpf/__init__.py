"""Package marker: the BPF C sources live in bpf/ of the checkout, installed as agent.bpf.programs."""
