# schedwatch: `sudo make run` starts the agent, `sudo make test` runs every test. Both install what they need.
VENV   := .venv
PYTHON := $(VENV)/bin/python
ARGS   ?=

.PHONY: run check stack image wheel test lint unit kernel bench load soak scenarios platforms clean

run:
	scripts/setup.sh run
	$(VENV)/bin/schedwatch run $(ARGS)

check:
	scripts/setup.sh run
	$(VENV)/bin/schedwatch check $(ARGS)

stack:
	scripts/stack.sh

image:
	scripts/build-image.sh

# schedwatch's wheel and those of its dependencies in dist/, for `pip install --no-index --find-links dist schedwatch`
# on a machine without network or root (analyze and compare need neither BPF nor bcc; docs/analyze.md).
wheel:
	python3 -m pip wheel --wheel-dir dist .

# Two passes (tests/support/parallel.py). The first, in TEST_WORKERS parallel processes, holds what no other
# process's load can change: the unit tier on fixtures, the VM tier (Debian's 6.1 under QEMU), the deploy tier
# (promtool, manifests, the local stack) and the packaging tier. The second runs every test that starts workloads
# here and judges their CPU contention, one after another with nothing beside them.
# ARGS go to both passes (pytest options: -x, -k NAME, --lf).
TEST_WORKERS   ?= 2
PARALLEL_TIERS := tests/platforms tests/unit tests/deploy tests/e2e
SERIAL_TIERS   := tests/containers tests/scenarios tests/kernel tests/load

test:
	scripts/setup.sh test
	$(MAKE) lint
	$(PYTHON) -m pytest -ra -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PARALLEL_TIERS) $(ARGS)
	$(PYTHON) -m pytest -ra -p no:xdist --durations=40 $(SERIAL_TIERS) $(ARGS)

lint:
	$(VENV)/bin/ruff check agent bpf tests bench
	$(VENV)/bin/ruff format --check agent bpf tests bench
	$(VENV)/bin/mypy

unit:
	$(PYTHON) -m pytest -ra tests/unit $(ARGS)

bench:
	scripts/setup.sh bench
	$(PYTHON) -m bench $(ARGS)

# The issue's full sizes (100,000 forks, 10,000 threads); results in load-out/results.jsonl, see docs/load-and-soak.md.
load:
	scripts/setup.sh test
	SCHEDWATCH_LOAD=full SCHEDWATCH_LOAD_OUT=load-out $(PYTHON) -m pytest -ra -s tests/load/test_fork_storm.py tests/load/test_threads.py $(ARGS)

# An hour of 1,000 cgroups made, yielded in and removed (ARGS="--duration 120" for a smoke run); writes soak-out/.
soak:
	scripts/setup.sh test
	$(PYTHON) -m tests.load.soak $(ARGS)

# Every scenario 3 times, diagnosed live; the precision/recall table goes to docs/diagnosis-scenarios.md (~35 min).
scenarios:
	scripts/setup.sh test
	$(PYTHON) -m tests.scenarios.suite --runs 3 --report docs/diagnosis-scenarios.md --log scenarios-out/runs.jsonl --documents scenarios-out $(ARGS)

# The kernel tests on Debian's 6.1 (cgroup v2 only, v1 only, PREEMPT_RT) and 6.12 kernels in VMs and on this
# machine's own; the table goes to docs/platforms.md (ARGS="--machines debian-6.1-v1" for one machine).
platforms:
	scripts/setup.sh test
	$(PYTHON) -m tests.platforms.matrix --report docs/platforms.md $(ARGS)

clean:
	rm -rf $(VENV) tests/.build build dist *.egg-info platforms-out
