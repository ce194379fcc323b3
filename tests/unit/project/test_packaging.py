"""Every package of the agent is in pyproject.toml's list: a package missing there is missing from the image."""

from __future__ import annotations

import tomllib

from tests.support.agent import REPO


def test_every_agent_package_is_listed_for_installation() -> None:
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {
        ".".join(init.parent.relative_to(REPO).parts)
        for init in (REPO / "agent").rglob("__init__.py")
        if "programs" not in init.parent.relative_to(REPO).parts
    }
    assert found - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert listed - found == {"agent.bpf.programs"}, "listed packages that do not exist"
