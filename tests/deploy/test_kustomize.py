"""deploy/kubernetes: the kustomize base renders, every object is valid Kubernetes, and the
objects fit together as `oncall serve` needs (acceptance 5 of issue 30).

The schemas are kubernetes-validate's (PyPI; they ship with it: offline), strict, so that an
unknown or misspelt field is an error rather than a field the API server drops. Each broken
copy below shows the validation can fail. The settings in the ConfigMap are loaded with
oncall's own loader, which refuses unknown keys.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from oncall.settings.loader import load_settings
from oncall.settings.model import Settings
from tests.deploy.manifests import ROOT, Obj, objects, one, rendered, written

NAMESPACE = "oncall"
POD_LABELS = {"app.kubernetes.io/name": "oncall-serve"}
EXPECTED = {
    ("Namespace", "oncall"),
    ("ServiceAccount", "oncall-serve"),
    ("ClusterRole", "oncall-serve-reader"),
    ("ClusterRoleBinding", "oncall-serve-reader"),
    ("ConfigMap", "oncall-serve-config"),
    ("Deployment", "oncall-serve"),
    ("PodDisruptionBudget", "oncall-serve"),
    ("Service", "oncall-serve"),
    ("NetworkPolicy", "oncall-serve"),
}
CLUSTER_SCOPED = {"Namespace", "ClusterRole", "ClusterRoleBinding"}
#: The oldest Kubernetes the schemas are checked against, and the newest they ship.
VERSIONS = ("1.29.0", kubernetes_validate.latest_version())


def _rendered() -> list[Obj]:
    objs = rendered()
    if objs is None:
        pytest.skip("no kubectl on PATH: the kustomize rendering is not checked here")
    return objs


def _container(objs: list[Obj]) -> Obj:
    containers = one(objs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    container: Obj = containers[0]
    return container


def _problems(obj: Obj, version: str) -> list[str]:
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        return [f"{obj['kind']}/{obj['metadata']['name']} at {where}: {exc.message}"]
    return []


def test_the_base_renders_every_object_into_its_namespace() -> None:
    objs = _rendered()
    assert {(o["kind"], o["metadata"]["name"]) for o in objs} == EXPECTED
    for obj in objs:
        meta = obj["metadata"]
        assert meta["labels"]["app.kubernetes.io/part-of"] == "oncall", obj["kind"]
        if obj["kind"] not in CLUSTER_SCOPED:
            assert meta["namespace"] == NAMESPACE, obj["kind"]
    # The image tag is the package's version (pyproject.toml).
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert _container(objs)["image"] == f"oncall:{project['version']}"


def test_without_kubectl_the_files_as_written_hold_the_same_objects() -> None:
    """The fallback where no kubectl is installed checks the same objects (kustomize only adds
    the namespace, the labels and the image tag)."""
    kinds_names = {(o["kind"], o["metadata"]["name"]) for o in written()}
    assert kinds_names == {(o["kind"], o["metadata"]["name"]) for o in _rendered()}


@pytest.mark.parametrize("version", VERSIONS)
def test_every_object_validates_against_the_kubernetes_schemas(version: str) -> None:
    objs = objects()
    assert len(objs) == len(EXPECTED)
    problems = [p for obj in objs for p in _problems(obj, version)]
    assert problems == []


def _set(path: str, value: Any) -> Callable[[Obj], None]:
    """A change to one object: `value` put at the dotted `path` (list indices as numbers)."""

    def change(obj: Obj) -> None:
        *parents, last = path.split(".")
        node: Any = obj
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        node[last] = value

    return change


CONTAINER = "spec.template.spec.containers.0"
BROKEN = [
    pytest.param("Deployment", _set("spec.replicas", "two"), id="replicas-not-a-number"),
    pytest.param(
        "Deployment",
        _set(f"{CONTAINER}.readinessProbe.httpGet.pth", "/readyz"),
        id="misspelt-probe-field",
    ),
    pytest.param(
        "Deployment",
        _set(f"{CONTAINER}.securityContext.readOnlyRootFilesystm", True),
        id="misspelt-security-field",
    ),
    pytest.param("ClusterRole", _set("rules.0.verbs", "get"), id="verbs-not-a-list"),
    pytest.param("NetworkPolicy", _set("spec.ingress.0.ports.0.port", []), id="bad-port"),
]


@pytest.mark.parametrize(("kind", "change"), BROKEN)
def test_a_broken_object_fails_the_schemas(kind: str, change: Callable[[Obj], None]) -> None:
    obj = one(objects(), kind)
    change(obj)
    assert _problems(obj, VERSIONS[-1]) != []


def test_the_deployment_runs_two_locked_down_replicas() -> None:
    objs = objects()
    deployment = one(objs, "Deployment", "oncall-serve")
    spec, pod = deployment["spec"], deployment["spec"]["template"]["spec"]
    assert spec["replicas"] == 2
    assert spec["selector"]["matchLabels"] == POD_LABELS
    assert POD_LABELS.items() <= spec["template"]["metadata"]["labels"].items()
    assert pod["serviceAccountName"] == one(objs, "ServiceAccount")["metadata"]["name"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = _container(objs)
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    for bound in ("requests", "limits"):
        assert set(container["resources"][bound]) == {"cpu", "memory"}, bound
    (port,) = container["ports"]
    assert (port["name"], port["containerPort"]) == ("http", 9464)
    assert container["args"] == ["--listen", "0.0.0.0:9464"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["startupProbe"]["httpGet"]["path"] == "/healthz"
    # Two replicas survive a drain one at a time.
    pdb = one(objs, "PodDisruptionBudget")["spec"]
    assert pdb["selector"]["matchLabels"] == POD_LABELS
    assert 0 < pdb["minAvailable"] < spec["replicas"]


def _settings_text(objs: list[Obj]) -> str:
    data = one(objs, "ConfigMap", "oncall-serve-config")["data"]
    text: str = data["oncall.yaml"]
    return text


def _mount(container: Obj, volume: str) -> str:
    (path,) = [m["mountPath"] for m in container["volumeMounts"] if m["name"] == volume]
    assert isinstance(path, str)
    return path


def test_the_settings_file_is_mounted_where_oncall_config_points() -> None:
    objs = objects()
    container = _container(objs)
    env = {e["name"]: e for e in container["env"]}
    pod = one(objs, "Deployment")["spec"]["template"]["spec"]
    (config,) = [v for v in pod["volumes"] if v["name"] == "config"]
    assert config["configMap"]["name"] == "oncall-serve-config"
    assert env["ONCALL_CONFIG"]["value"] == _mount(container, "config") + "/oncall.yaml"
    # Every mount is read-only but the scratch space.
    for mount in container["volumeMounts"]:
        assert mount.get("readOnly") is True or mount["name"] == "tmp", mount


def test_the_webhook_token_is_a_mounted_secret_file_the_settings_name() -> None:
    objs = objects()
    container = _container(objs)
    pod = one(objs, "Deployment")["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "webhook-token"]
    secret = volume["secret"]
    assert secret["secretName"] == "oncall-serve-webhook-token"
    assert secret["items"] == [{"key": "token", "path": "token"}]
    assert secret["defaultMode"] & 0o007 == 0, "the token is not world-readable"
    settings = yaml.safe_load(_settings_text(objs))
    assert settings["serve"]["token_file"] == _mount(container, "webhook-token") + "/token"
    # Referenced, never shipped: no Secret object, and no environment variable carries it.
    assert not [o for o in objs if o["kind"] == "Secret"]
    for entry in container["env"]:
        ref = (entry.get("valueFrom") or {}).get("secretKeyRef") or {}
        assert ref.get("name") != "oncall-serve-webhook-token", entry


def test_the_configmap_settings_load_with_oncalls_loader(tmp_path: Path) -> None:
    document = yaml.safe_load(_settings_text(objects()))
    assert document["read_only"] is True
    assert document["alerts"]["dirs"] == ["/app/alerts"]  # the Containerfile's COPY targets
    assert document["runbooks"]["dirs"] == ["/app/runbooks"]
    has_serve = "serve" in Settings.model_fields
    if not has_serve:  # the serve settings arrive with `oncall serve` (issue 30, Build 1)
        document.pop("serve")
    path = tmp_path / "oncall.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    loaded = load_settings(config=path, environ={}, cwd=tmp_path).settings
    assert loaded.read_only is True
    assert loaded.kubernetes.kubeconfig is None  # in-cluster: the service account
    if not has_serve:
        pytest.skip("no `serve:` settings section in this build: the rest of the file loads")


def test_the_service_and_network_policy_admit_only_alertmanager_and_prometheus() -> None:
    objs = objects()
    service = one(objs, "Service", "oncall-serve")["spec"]
    assert service["selector"] == POD_LABELS
    port = {"name": "http", "port": 9464, "targetPort": "http", "protocol": "TCP"}
    assert service["ports"] == [port]
    policy = one(objs, "NetworkPolicy", "oncall-serve")["spec"]
    assert policy["podSelector"]["matchLabels"] == POD_LABELS
    assert sorted(policy["policyTypes"]) == ["Egress", "Ingress"]
    (ingress,) = policy["ingress"]
    assert ingress["ports"] == [{"port": 9464, "protocol": "TCP"}]
    senders = set()
    for peer in ingress["from"]:
        assert set(peer) == {"namespaceSelector", "podSelector"}, peer  # no ipBlock, no "all"
        senders.add(peer["podSelector"]["matchLabels"]["app.kubernetes.io/name"])
    assert senders == {"alertmanager", "prometheus"}
    egress_ports = {p["port"] for rule in policy["egress"] for p in rule["ports"]}
    # DNS, the API server and HTTPS webhooks, Prometheus, Alertmanager, Redis, vLLM.
    assert egress_ports == {53, 443, 6443, 9090, 9093, 6379, 8000}
    assert all(rule.get("ports") for rule in policy["egress"]), "an egress rule without ports"
