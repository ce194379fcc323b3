# schedwatch: `sudo make run` starts the agent, `sudo make test` runs every test. Both install what they need.
VENV   := .venv
PYTHON := $(VENV)/bin/python
ARGS   ?=

.PHONY: run check stack image test lint unit kernel bench clean

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

test:
	scripts/setup.sh test
	$(MAKE) lint
	$(PYTHON) -m pytest -ra $(ARGS)

lint:
	$(VENV)/bin/ruff check agent bpf tests bench
	$(VENV)/bin/ruff format --check agent bpf tests bench
	$(VENV)/bin/mypy

unit:
	$(PYTHON) -m pytest -ra tests/unit $(ARGS)

bench:
	scripts/setup.sh bench
	$(PYTHON) -m bench $(ARGS)

clean:
	rm -rf $(VENV) tests/.build build *.egg-info
