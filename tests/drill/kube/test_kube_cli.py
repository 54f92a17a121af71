"""`python -m oncall_drill.kube_sim` as the drill orchestration runs it: a process, a kubeconfig."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from oncall_drill.kube_sim import READ_ONLY_CONTEXT
from oncall_drill.netutil import free_loopback_port, wait_for_port
from tests.harness.waiting import wait_until

SEED = """
apiVersion: v1
kind: Namespace
metadata: {name: ai}
---
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: flags, namespace: ai}
  data: {degraded-mode: "true"}
"""


def test_module_serves_a_seeded_cluster_and_stops_on_sigterm(tmp_path: Path) -> None:
    from kubernetes import client, config

    port = free_loopback_port()
    kubeconfig = tmp_path / "kubeconfig"
    seed = tmp_path / "seed.yaml"
    seed.write_text(SEED, encoding="utf-8")
    argv = [sys.executable, "-m", "oncall_drill.kube_sim", "--port", str(port)]
    argv += ["--kubeconfig", str(kubeconfig), "--state-file", str(seed), "--start-delay", "0.05"]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for_port(port, timeout=20), "the simulator did not listen"
        wait_until(kubeconfig.exists, within=10, what="the kubeconfig")
        api = config.new_client_from_config(config_file=str(kubeconfig), context=READ_ONLY_CONTEXT)
        try:
            cm = client.CoreV1Api(api).read_namespaced_config_map("flags", "ai")
            assert cm.data == {"degraded-mode": "true"}
            assert client.AppsV1Api(api).list_namespaced_deployment("ai").items == []
        finally:
            api.close()
        assert oct(kubeconfig.stat().st_mode & 0o777) == "0o600"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            _, stderr = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate(timeout=5)
            raise
    assert proc.returncode == 0, stderr
    assert f"listening on http://127.0.0.1:{port}" in stderr


def test_module_rejects_a_bad_seed_file(tmp_path: Path) -> None:
    seed = tmp_path / "seed.yaml"
    seed.write_text("- just a string\n", encoding="utf-8")
    argv = [sys.executable, "-m", "oncall_drill.kube_sim", "--seed-file", str(seed)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2
    assert "needs kind and metadata.name" in done.stderr
