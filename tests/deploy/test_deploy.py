"""deploy/: alert rules (promtool), Kubernetes manifests (kubernetes-validate), and their agreement with the agent."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from agent import config, metrics
from agent.collectors import registry
from agent.commands import agent_flags
from agent.commands.parser import CommandParser

REPO = Path(__file__).resolve().parents[2]
PROMETHEUS = REPO / "deploy" / "prometheus"
KUBERNETES = REPO / "deploy" / "kubernetes"
BASE = KUBERNETES / "base"
OVERLAYS = KUBERNETES / "overlays"


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
    assert "SUCCESS: 17 rules found" in result.stdout


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
    files = sorted(str(p) for p in [*BASE.glob("*.yaml"), *KUBERNETES.glob("*.yaml")])
    result = subprocess.run([tool("kubernetes-validate"), "--strict", *files], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    output = result.stdout + result.stderr
    for name in ("daemonset.yaml", "service.yaml", "namespace.yaml", "networkpolicy.yaml", "sidecar-example.yaml"):
        assert re.search(rf"INFO \S*{name} passed", output), output
    # Custom resources have no schema in kubernetes-validate: only these may be skipped, and no failure.
    skipped = re.findall(r"WARN \S*/(\S+) Couldn't find schema", output)
    assert sorted(skipped) == ["kustomization.yaml", "kustomization.yaml", "podmonitor.yaml"], output
    assert "ERROR" not in output


def test_kustomization_lists_every_manifest_but_the_example() -> None:
    kustomization = yaml.safe_load((BASE / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    present = {p.name for p in BASE.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == present
    assert yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text())["resources"] == ["base"]
    monitor = yaml.safe_load((BASE / "podmonitor.yaml").read_text())
    daemonset = yaml.safe_load((BASE / "daemonset.yaml").read_text())
    pod_labels = daemonset["spec"]["template"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    ports = {p["name"] for p in daemonset["spec"]["template"]["spec"]["containers"][0]["ports"]}
    assert monitor["spec"]["podMetricsEndpoints"][0]["port"] in ports


def render(directory: Path) -> list[dict[str, Any]]:
    """A kustomization rendered by kubectl's built-in kustomize."""
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl >= 1.21 is missing (its built-in kustomize renders the overlays; Debian's is too old)"
    result = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def by_kind(documents: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (document,) = [d for d in documents if d["kind"] == kind]
    return document


def agent_container(documents: list[dict[str, Any]]) -> dict[str, Any]:
    container: dict[str, Any] = by_kind(documents, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]
    return container


def parse_agent_args(args: list[str]) -> config.Settings:
    assert args[0] == "run"
    parser = CommandParser(exit_on_error=False)
    agent_flags.add_agent_arguments(parser)
    return config.from_args(parser.parse_args(args[1:]), list(registry()))


OVERLAY_NAMES = sorted(p.name for p in OVERLAYS.iterdir() if (p / "kustomization.yaml").is_file())


def documented_overlays() -> list[str]:
    """The overlays docs/security.md describes: the first `name` of each item of its "Overlays" section."""
    section = (REPO / "docs" / "security.md").read_text().split("\n## Overlays\n", 1)[1].split("\n## ", 1)[0]
    return sorted(re.findall(r"^- `([\w-]+)`", section, re.MULTILINE))


def test_the_overlays_are_the_documented_ones() -> None:
    documented = documented_overlays()
    assert documented, "docs/security.md has no list of overlays under '## Overlays'"
    assert documented == OVERLAY_NAMES, "every overlay directory described in docs/security.md, and no other"


@pytest.mark.parametrize("overlay", ["(base)", *OVERLAY_NAMES])
def test_every_rendering_is_valid_for_a_current_kubernetes(overlay: str, tmp_path: Path) -> None:
    documents = render(KUBERNETES if overlay == "(base)" else OVERLAYS / overlay)
    rendered = tmp_path / "rendered.yaml"
    rendered.write_text(yaml.safe_dump_all(documents))
    result = subprocess.run([tool("kubernetes-validate"), "--strict", str(rendered)], capture_output=True, text=True)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    passed = re.findall(r"INFO \S+ passed for resource (\S+) against", output)
    assert sorted(passed) == [
        "daemonset/schedwatch",
        "namespace/schedwatch",
        "networkpolicy/schedwatch",
        "service/schedwatch",
    ]
    assert re.findall(r"Couldn't find schema for kind (\w+)", output) == ["PodMonitor"], output
    assert all(d["metadata"].get("namespace", "schedwatch") == "schedwatch" for d in documents)
    parse_agent_args(agent_container(documents)["args"])


def test_the_base_daemonset_adds_only_bpf_and_perfmon_and_mounts_no_whole_run() -> None:
    documents = render(KUBERNETES)
    pod = by_kind(documents, "DaemonSet")["spec"]["template"]["spec"]
    container = agent_container(documents)
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["BPF", "PERFMON"]}
    assert "--bpf-stats" not in container["args"]
    assert not pod.get("hostNetwork"), "a NetworkPolicy would not apply to a hostNetwork pod"
    volumes = {v["name"]: v for v in pod["volumes"]}
    host_paths = {v["hostPath"]["path"] for v in volumes.values() if "hostPath" in v}
    assert host_paths == {
        "/sys/fs/cgroup",
        "/sys/kernel/tracing",
        "/lib/modules",
        "/usr/src",
        "/run/containerd",
        "/run/crio",
        "/run/podman",
    }
    for mount in container["volumeMounts"]:
        assert mount.get("readOnly") or "emptyDir" in volumes[mount["name"]], f"{mount['name']} is writable"
    # Every runtime socket the agent is pointed at lies in a mounted runtime directory (Docker's: the overlay).
    settings = parse_agent_args(container["args"])
    mounted = [Path(m["mountPath"]) for m in container["volumeMounts"]]
    sockets = [*settings.docker_sockets, *settings.cri_sockets, settings.containerd_socket]
    for socket in sockets:
        assert socket is not None
        if socket != Path("/host/run/docker.sock"):
            assert any(socket.is_relative_to(m) for m in mounted), f"{socket} is not under a mount"


def test_old_kernels_overlay_swaps_in_sys_admin_and_sys_resource() -> None:
    capabilities = agent_container(render(OVERLAYS / "old-kernels"))["securityContext"]["capabilities"]
    assert capabilities == {"drop": ["ALL"], "add": ["SYS_ADMIN", "SYS_RESOURCE"]}


def test_bpf_stats_overlay_adds_sys_admin_and_the_flag() -> None:
    container = agent_container(render(OVERLAYS / "bpf-stats"))
    assert container["securityContext"]["capabilities"]["add"] == ["BPF", "PERFMON", "SYS_ADMIN"]
    assert parse_agent_args(container["args"]).bpf_stats


def test_docker_overlay_mounts_the_socket_the_agent_asks() -> None:
    documents = render(OVERLAYS / "docker")
    container = agent_container(documents)
    volumes = {v["name"]: v for v in by_kind(documents, "DaemonSet")["spec"]["template"]["spec"]["volumes"]}
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "docker"]
    assert volumes["docker"]["hostPath"] == {"path": "/run/docker.sock", "type": "Socket"}
    assert mount["readOnly"] is True
    assert Path(mount["mountPath"]) in parse_agent_args(container["args"]).docker_sockets


def test_tls_auth_overlay_serves_tls_with_basic_auth_and_the_podmonitor_follows() -> None:
    documents = render(OVERLAYS / "tls-auth")
    container = agent_container(documents)
    settings = parse_agent_args(container["args"])
    volumes = {v["name"]: v for v in by_kind(documents, "DaemonSet")["spec"]["template"]["spec"]["volumes"]}
    secret_files = {}
    for mount in container["volumeMounts"]:
        secret = volumes[mount["name"]].get("secret")
        if secret:
            assert mount["readOnly"] is True
            keys = [item["path"] for item in secret.get("items", [])] or ["tls.crt", "tls.key"]
            for key in keys:
                secret_files[Path(mount["mountPath"]) / key] = secret["secretName"]
    assert secret_files[settings.tls_cert_file] == secret_files[settings.tls_key_file] == "schedwatch-tls"  # type: ignore[index]
    assert secret_files[settings.basic_auth_password_file] == "schedwatch-basic-auth"  # type: ignore[index]
    assert settings.basic_auth_user == "prometheus"
    endpoint = by_kind(documents, "PodMonitor")["spec"]["podMetricsEndpoints"][0]
    assert endpoint["scheme"] == "https"
    assert endpoint["tlsConfig"]["ca"]["secret"]["name"] == "schedwatch-tls"
    assert endpoint["basicAuth"]["password"] == {"name": "schedwatch-basic-auth", "key": "password"}
    assert endpoint["basicAuth"]["username"] == {"name": "schedwatch-basic-auth", "key": "username"}


def container_environment(documents: list[dict[str, Any]]) -> dict[str, str]:
    return {item["name"]: item["value"] for item in agent_container(documents).get("env", [])}


@pytest.mark.parametrize("overlay", ["(base)", *OVERLAY_NAMES])
def test_every_variable_a_manifest_sets_is_a_flags_variable(overlay: str) -> None:
    """The one naming rule (docs/configuration.md): no deprecated name, no name the agent does not read."""
    documents = render(KUBERNETES if overlay == "(base)" else OVERLAYS / overlay)
    variables = {flag.variable for flag in config.flags_of(config.GROUPS, list(registry()))}
    set_here = {name for name in container_environment(documents) if name.startswith("SCHEDWATCH_")}
    assert set_here and set_here <= variables, set_here - variables


def test_tls_auth_overlay_lets_diagnose_in_the_pod_read_the_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    """`kubectl exec ds/schedwatch -- schedwatch diagnose --from https://127.0.0.1:17953` finds the CA, the server
    name the PodMonitor checks, and the agent's own user and password file in its environment."""
    documents = render(OVERLAYS / "tls-auth")
    container = agent_container(documents)
    agent = parse_agent_args(container["args"])
    for name, value in container_environment(documents).items():
        monkeypatch.setenv(name, value)
    parser = CommandParser(exit_on_error=False)
    agent_flags.add_client_arguments(parser)
    client = config.client_from_args(parser.parse_args([]))
    tls_mount = next(m for m in container["volumeMounts"] if m["name"] == "tls")
    assert client.tls_ca_file == Path(tls_mount["mountPath"]) / "ca.crt"  # the PodMonitor's CA, same Secret
    endpoint = by_kind(documents, "PodMonitor")["spec"]["podMetricsEndpoints"][0]
    assert client.tls_server_name == endpoint["tlsConfig"]["serverName"]
    assert (client.basic_auth_user, client.basic_auth_password_file) == (
        agent.basic_auth_user,
        agent.basic_auth_password_file,
    )


def test_networkpolicy_lets_only_the_scraper_in_and_nothing_out() -> None:
    documents = render(KUBERNETES)
    policy = by_kind(documents, "NetworkPolicy")["spec"]
    pod_labels = by_kind(documents, "DaemonSet")["spec"]["template"]["metadata"]["labels"]
    assert policy["podSelector"]["matchLabels"].items() <= pod_labels.items()
    assert sorted(policy["policyTypes"]) == ["Egress", "Ingress"]
    assert policy.get("egress", []) == []
    (rule,) = policy["ingress"]
    (source,) = rule["from"]
    assert source["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "monitoring"}
    assert source["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}
    ports = {p["name"] for p in agent_container(documents)["ports"]}
    assert [p["port"] for p in rule["ports"]] == ["metrics"] and "metrics" in ports


@pytest.mark.parametrize(
    ("manifest", "container"), [("base/daemonset.yaml", "schedwatch"), ("sidecar-example.yaml", "schedwatch")]
)
def test_manifest_args_are_flags_the_agent_accepts(manifest: str, container: str) -> None:
    documents = [d for d in yaml.safe_load_all((KUBERNETES / manifest).read_text()) if d]
    spec = documents[0]["spec"]
    pod = spec["template"]["spec"] if "template" in spec else spec
    args = next(c for c in pod["containers"] if c["name"] == container)["args"]
    assert args[0] == "run"
    parser = CommandParser(exit_on_error=False)
    agent_flags.add_agent_arguments(parser)
    parsed = parser.parse_args(args[1:])
    settings = config.from_args(parsed, list(registry()))
    assert settings.listen_host == "0.0.0.0"
    assert settings.cgroup_root == Path("/host/sys/fs/cgroup")
    capabilities = next(c for c in pod["containers"] if c["name"] == container)["securityContext"]["capabilities"]
    assert capabilities["drop"] == ["ALL"]
    assert capabilities["add"] == ["BPF", "PERFMON"]
