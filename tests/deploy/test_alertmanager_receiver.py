"""deploy/kubernetes/alertmanager-receiver.yaml, the snippet a team pastes into its
alertmanager.yml, is valid Alertmanager configuration (`amtool check-config`, the real
Debian amtool, on a minimal configuration that embeds it) and points at what the base
deploys: the Service's port, serve's webhook path, the token Secret's file. Broken copies
show amtool refusing them.
"""

from __future__ import annotations

import copy
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from tests.deploy.manifests import BASE, Obj, objects, one
from tests.harness.processes import require_binary

SNIPPET = BASE / "alertmanager-receiver.yaml"
AMTOOL_TIMEOUT_S = 60


def snippet() -> Obj:
    doc = yaml.safe_load(SNIPPET.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def embedded(part: Obj) -> Obj:
    """A minimal alertmanager.yml: a default receiver, with the snippet pasted in."""
    return {
        "route": {"receiver": "pager", "routes": part["route"]["routes"]},
        "receivers": [{"name": "pager"}, *part["receivers"]],
    }


def check_config(config: Obj, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return subprocess.run(
        [require_binary("amtool", "prometheus-alertmanager"), "check-config", str(path)],
        capture_output=True,
        text=True,
        timeout=AMTOOL_TIMEOUT_S,
        check=False,
    )


def webhook(part: Obj) -> Obj:
    (receiver,) = part["receivers"]
    (config,) = receiver["webhook_configs"]
    assert isinstance(config, dict)
    return config


def test_amtool_accepts_the_snippet_in_a_configuration(tmp_path: Path) -> None:
    proc = check_config(embedded(snippet()), tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout and "2 receivers" in proc.stdout, proc.stdout


def test_the_snippet_points_at_the_deployed_service_and_token() -> None:
    part, objs = snippet(), objects()
    (route,) = part["route"]["routes"]
    assert route["receiver"] == part["receivers"][0]["name"]
    assert route["continue"] is True  # the pager still gets every alert
    config = webhook(part)
    assert config["send_resolved"] is True
    url = urlsplit(config["url"])
    service = one(objs, "Service", "oncall-serve")
    assert url.hostname == "oncall-serve.oncall.svc"
    assert url.port == service["spec"]["ports"][0]["port"]
    settings = yaml.safe_load(one(objs, "ConfigMap")["data"]["oncall.yaml"])
    assert url.path == settings["serve"]["webhook_path"]
    auth = config["http_config"]["authorization"]
    assert set(auth) == {"type", "credentials_file"}  # the token is never in the file itself
    secret = Path(auth["credentials_file"])
    # prometheus-operator mounts spec.secrets at /etc/alertmanager/secrets/NAME/KEY.
    assert (secret.parent.name, secret.name) == ("oncall-serve-webhook-token", "token")


def _in_webhook(key: str, value: Any) -> Callable[[Obj], None]:
    return lambda part: webhook(part).__setitem__(key, value)


def _credentials_too(part: Obj) -> None:
    webhook(part)["http_config"]["authorization"]["credentials"] = "in-the-file"


def _route_to(name: str) -> Callable[[Obj], None]:
    return lambda part: part["route"]["routes"][0].__setitem__("receiver", name)


BROKEN = [
    pytest.param(_credentials_too, "at most one of", id="token-and-token-file"),
    pytest.param(_in_webhook("url", "oncall-serve:9464/hook"), "scheme", id="url-no-scheme"),
    pytest.param(_route_to("oncall"), "undefined receiver", id="unknown-receiver"),
]


@pytest.mark.parametrize(("change", "said"), BROKEN)
def test_amtool_refuses_a_broken_copy(
    tmp_path: Path, change: Callable[[Obj], None], said: str
) -> None:
    part = copy.deepcopy(snippet())
    change(part)
    proc = check_config(embedded(part), tmp_path)
    assert proc.returncode != 0 and said in proc.stdout + proc.stderr, proc.stdout + proc.stderr
