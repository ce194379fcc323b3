"""Load tier, short versions for `make test` (the long ones run as `make load` and `make soak`); shared
fixtures (cgroups, workloads) are in tests/conftest.py."""
