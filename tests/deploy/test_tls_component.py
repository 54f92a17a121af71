"""deploy/kubernetes/components/tls: the optional kustomize Component with which serve
terminates TLS itself. An overlay of the base with the Component renders (`kubectl
kustomize`), validates against the Kubernetes schemas, and gives the Deployment the
certificate Secret as files, the settings that name them (as ONCALL_SERVE__* environment
variables, which oncall's loader reads over the settings file) and HTTPS probes.
"""

from __future__ import annotations

import os
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from oncall.settings.loader import load_settings
from oncall.settings.model import Settings
from tests.deploy.manifests import BASE, Obj, kubectl, one, render

COMPONENT = BASE / "components" / "tls"
CERTS = "/var/run/secrets/oncall-serve-tls"


def _overlay(tmp_path: Path) -> list[Obj]:
    if kubectl() is None:
        pytest.skip("no kubectl on PATH: the kustomize rendering is not checked here")
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    # kustomize takes only relative paths to other kustomizations.
    text = yaml.safe_dump(
        {
            "resources": [os.path.relpath(BASE, overlay)],
            "components": [os.path.relpath(COMPONENT, overlay)],
        }
    )
    (overlay / "kustomization.yaml").write_text(text, encoding="utf-8")
    return render(overlay)


def test_the_tls_overlay_renders_valid_objects(tmp_path: Path) -> None:
    for obj in _overlay(tmp_path):
        kubernetes_validate.validate(obj, kubernetes_validate.latest_version(), strict=True)


def test_the_tls_overlay_serves_https_from_the_secret(tmp_path: Path) -> None:
    objs = _overlay(tmp_path)
    pod = one(objs, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        get = container[probe]["httpGet"]
        assert get["scheme"] == "HTTPS" and get["port"] == "http", probe
    (volume,) = [v for v in pod["volumes"] if v["name"] == "tls"]
    assert volume["secret"]["secretName"] == "oncall-serve-tls"
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "tls"]
    assert (mount["mountPath"], mount["readOnly"]) == (CERTS, True)
    env = {e["name"]: e.get("value") for e in container["env"]}
    # kubernetes.io/tls Secrets hold tls.crt and tls.key.
    assert env["ONCALL_SERVE__TLS_CERT_FILE"] == f"{CERTS}/tls.crt"
    assert env["ONCALL_SERVE__TLS_KEY_FILE"] == f"{CERTS}/tls.key"
    # The base's own mounts and settings are kept.
    assert {m["name"] for m in container["volumeMounts"]} == {
        "config",
        "webhook-token",
        "tmp",
        "tls",
    }

    if "serve" not in Settings.model_fields:
        pytest.skip("no `serve:` settings section in this build: the variables are not loaded")
    settings_file = tmp_path / "oncall.yaml"
    settings_file.write_text(one(objs, "ConfigMap")["data"]["oncall.yaml"], encoding="utf-8")
    environ = {k: v for k, v in env.items() if k.startswith("ONCALL_SERVE__") and v}
    loaded = load_settings(config=settings_file, environ=environ, cwd=tmp_path).settings
    serve = getattr(loaded, "serve")  # noqa: B009 - a section this build may not have
    assert str(serve.tls_cert_file) == f"{CERTS}/tls.crt"
    assert str(serve.tls_key_file) == f"{CERTS}/tls.key"
