"""Who a count belongs to: the one owner of workload identity.

- :mod:`agent.identity.paths`: container ids in cgroup paths (what a container id looks like, where it sits);
- :mod:`agent.identity.labels`: the one function every workload and process label value goes through;
- :mod:`agent.identity.workload`: a cgroup path (and a process) -> its workload's labels;
- :mod:`agent.identity.placement`: kernel map keys (cgroup ids, processes) -> cgroup paths;
- :mod:`agent.identity.resolver`: runtime answers, asked in the background and cached;
- :mod:`agent.identity.runtimes`: one client per runtime API.

The rules (what is trusted, how values are bounded) are written down in docs/identity.md.
"""
