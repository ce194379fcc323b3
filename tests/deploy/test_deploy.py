"""deploy/: alert rules (promtool), Kubernetes manifests (kubernetes-validate), and their agreement with the agent."""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from agent import config, metrics
from agent.collectors import registry

REPO = Path(__file__).resolve().parents[2]
PROMETHEUS = REPO / "deploy" / "prometheus"
KUBERNETES = REPO / "deploy" / "kubernetes"


def tool(name: str) -> str:
    path = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    assert path, f"{name} is missing: run `sudo make test`, which installs it"
    return path


def exported_names() -> set[str]:
    """Every sample name the agent can export (counters with _total, histograms with their parts)."""
    names = set()
    for spec in vars(metrics).values():
        if isinstance(spec, metrics.CounterSpec):
            names.add(f"{spec.name}_total")
        elif isinstance(spec, metrics.HistogramSpec):
            names |= {f"{spec.name}_bucket", f"{spec.name}_sum", f"{spec.name}_count"}
        elif isinstance(spec, metrics.MetricSpec):
            names.add(spec.name)
    return names


def test_promtool_checks_the_rules() -> None:
    result = subprocess.run(
        [tool("promtool"), "check", "rules", str(PROMETHEUS / "alerts.yaml")], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 8 rules found" in result.stdout


def test_promtool_unit_tests_fire_and_stay_quiet() -> None:
    result = subprocess.run(
        [tool("promtool"), "test", "rules", "alerts_test.yaml"], cwd=PROMETHEUS, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    groups = yaml.safe_load((PROMETHEUS / "alerts_test.yaml").read_text())["tests"]
    tests = [test for group in groups for test in group["alert_rule_test"]]
    alerts = {
        rule["alert"]
        for group in yaml.safe_load((PROMETHEUS / "alerts.yaml").read_text())["groups"]
        for rule in group["rules"]
    }
    firing = {t["alertname"] for t in tests if t["exp_alerts"]}
    quiet = {t["alertname"] for t in tests if not t["exp_alerts"]}
    assert firing == alerts == quiet, "every alert needs a firing and a not-firing case"


def test_rules_only_use_metrics_the_agent_exports() -> None:
    exported = exported_names()
    for group in yaml.safe_load((PROMETHEUS / "alerts.yaml").read_text())["groups"]:
        for rule in group["rules"]:
            for name in re.findall(r"\b(schedwatch_\w+)", rule["expr"]):
                assert name in exported, f"{rule['alert']} uses {name}, which the agent does not export"


def test_manifests_are_valid_for_a_current_kubernetes() -> None:
    files = sorted(str(p) for p in KUBERNETES.glob("*.yaml"))
    result = subprocess.run([tool("kubernetes-validate"), "--strict", *files], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    output = result.stdout + result.stderr
    for name in ("daemonset.yaml", "service.yaml", "namespace.yaml", "sidecar-example.yaml"):
        assert re.search(rf"INFO \S*{name} passed", output), output
    # Custom resources have no schema in kubernetes-validate: only these two may be skipped, and no failure.
    skipped = re.findall(r"WARN \S*/(\S+) Couldn't find schema", output)
    assert sorted(skipped) == ["kustomization.yaml", "podmonitor.yaml"], output
    assert "ERROR" not in output


def test_kustomization_lists_every_manifest_but_the_example() -> None:
    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    present = {p.name for p in KUBERNETES.glob("*.yaml")} - {"kustomization.yaml", "sidecar-example.yaml"}
    assert listed == present
    monitor = yaml.safe_load((KUBERNETES / "podmonitor.yaml").read_text())
    daemonset = yaml.safe_load((KUBERNETES / "daemonset.yaml").read_text())
    pod_labels = daemonset["spec"]["template"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    ports = {p["name"] for p in daemonset["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert monitor["spec"]["podMetricsEndpoints"][0]["port"] in ports


@pytest.mark.parametrize(
    ("manifest", "container"), [("daemonset.yaml", "schedwatch"), ("sidecar-example.yaml", "schedwatch")]
)
def test_manifest_args_are_flags_the_agent_accepts(manifest: str, container: str) -> None:
    documents = [d for d in yaml.safe_load_all((KUBERNETES / manifest).read_text()) if d]
    spec = documents[0]["spec"]
    pod = spec["template"]["spec"] if "template" in spec else spec
    args = next(c for c in pod["containers"] if c["name"] == container)["args"]
    assert args[0] == "run"
    parser = argparse.ArgumentParser(exit_on_error=False)
    config.add_arguments(parser, list(registry()))
    parsed = parser.parse_args(args[1:])
    settings = config.from_args(parsed, list(registry()))
    assert settings.listen_host == "0.0.0.0"
    assert settings.cgroup_root == Path("/host/sys/fs/cgroup")
    capabilities = next(c for c in pod["containers"] if c["name"] == container)["securityContext"]["capabilities"]
    assert capabilities["drop"] == ["ALL"]
    assert {"BPF", "PERFMON"} <= set(capabilities["add"])
