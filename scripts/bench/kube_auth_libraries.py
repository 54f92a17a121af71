"""Kubernetes auth: oncall's own loader beside lightkube's, case by case, and their import cost.

Why Kubernetes authentication is oncall's own code (docs/architecture.md, section 6 "Why some
parts are our own"), measured so that it can be re-checked when lightkube releases: each case
below is a kubeconfig that oncall's auth tests (tests/drill/kube/test_kube_client_auth.py) cover,
given to oncall's loader (`oncall.backends.kube_config`) and to lightkube's
(`lightkube.config.kubeconfig` + `client_adapter`), offline (exec plugins run, nothing is sent).
Each cell says what happened; kubectl's behaviour is the reference. Then the import cost of
each on top of what `oncall check` imports anyway (httpx, yaml, the settings model): median of
`-X importtime` figures over N fresh interpreters, as a ratio to ours.

lightkube is not a dependency; install it for this comparison only (kr8s too, for its import):

    .venv/bin/pip install lightkube kr8s
    .venv/bin/python scripts/bench/kube_auth_libraries.py [--runs 5]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import trustme
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `oncall` from anywhere

from oncall.backends import kube_config
from oncall.settings.model import KubernetesSettings

SERVER = "https://127.0.0.1:6443"  # never contacted: nothing is sent
V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"
PLUGIN = """#!{python}
import json, os, sys
with open(os.environ["LOG"], "a") as log:
    log.write(json.dumps({{"info": os.environ.get("KUBERNETES_EXEC_INFO")}}) + "\\n")
print(json.dumps({{"apiVersion": os.environ["API"], "kind": "ExecCredential",
                  "status": json.loads(os.environ["STATUS"])}}))
"""
#: On top of these (what a fresh `oncall check` has imported before it reaches Kubernetes).
PRELUDE = "import httpx, yaml, oncall.settings.model"
IMPORTS = {
    "ours": "import oncall.backends.kube_config, oncall.backends.kube_exec, "
    "oncall.backends.kube_http",
    "lightkube config": "import lightkube.config.kubeconfig, lightkube.config.client_adapter",
    "kr8s": "import kr8s",
}


class Lab:
    """A scratch directory of kubeconfigs and one exec plugin, and both loaders over them."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.plugin = root / "plugin.py"
        self.plugin.write_text(PLUGIN.format(python=sys.executable), encoding="utf-8")
        self.plugin.chmod(0o755)
        self.log = root / "runs.jsonl"

    def config(
        self, name: str, user: dict[str, Any] | None = None, cluster: dict[str, Any] | None = None
    ) -> Path:
        doc = {
            "clusters": [
                {"name": "c", "cluster": {"server": "https://127.0.0.1:6443", **(cluster or {})}}
            ],
            "users": [{"name": "u", "user": user if user is not None else {"token": "T"}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        }
        return self.write(name, doc)

    def write(self, name: str, doc: Any) -> Path:
        path = self.root / name
        path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc), encoding="utf-8")
        return path

    def exec_spec(
        self, api: str, status: dict[str, Any], command: str = "", **extra: Any
    ) -> dict[str, Any]:
        """A stanza running the plugin: by its absolute path unless `command` names it."""
        env = {"LOG": str(self.log), "API": api, "STATUS": json.dumps(status)}
        spec = {"apiVersion": api, "command": command or str(self.plugin), "args": ["x"], **extra}
        spec["env"] = [{"name": k, "value": v} for k, v in env.items()]
        return spec

    def runs(self) -> list[dict[str, Any]]:
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        self.log.unlink(missing_ok=True)
        return [json.loads(line) for line in lines]


def ours(path: Path | None) -> kube_config.KubeConnection:
    return kube_config.load_connection(KubernetesSettings(kubeconfig=path))


class Lightkube:
    """lightkube's config layer, imported by name: it is not one of oncall's dependencies."""

    def __init__(self) -> None:
        self.kubeconfig = importlib.import_module("lightkube.config.kubeconfig")
        self.adapter = importlib.import_module("lightkube.config.client_adapter")

    def params(self, path: Path | None) -> dict[str, Any]:
        """What lightkube hands its HTTP client: base_url, verify (SSLContext), auth."""
        config = (
            self.kubeconfig.KubeConfig.from_env(service_account=path or "/nonexistent")
            if path is None
            else self.kubeconfig.KubeConfig.from_file(path)
        )
        result: dict[str, Any] = self.adapter.ConnectionParams().httpx_params(config.get())
        return result

    def first_request(self, path: Path) -> str:
        return self.authorization(self.params(path))

    def cluster(self, path: Path) -> object:
        return self.kubeconfig.KubeConfig.from_file(path).get().cluster

    def authorization(self, params: dict[str, Any]) -> str:
        """The Authorization header its auth object puts on a first request."""
        request = self.adapter.httpx.Request("GET", "https://127.0.0.1:6443/api")
        sent = next(params["auth"].sync_auth_flow(request))
        return str(sent.headers.get("Authorization"))


def outcome(run: Callable[[], object]) -> str:
    """The cell: the value, or the exception's type and the first line of its message."""
    try:
        return str(run())
    except Exception as exc:  # a loader's failure is the measurement
        first = str(exc).splitlines()[0] if str(exc) else ""
        return f"{type(exc).__name__}: {first[:110]}"


@contextmanager
def environment(**values: str) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


Run = Callable[[], object]


class Case(NamedTuple):
    name: str
    kubectl: str  # what kubectl (client-go) does: the reference
    ours: Run
    lightkube: Run


def file_cases(lab: Lab, lk: Lightkube) -> Iterator[Case]:
    """Which files, which token, which TLS name (each is a test in test_kube_client_auth.py)."""
    users_only = {"users": [{"name": "u", "user": {"token": "FIRST"}}], "current-context": "x"}
    first = lab.write("a", {**users_only, "clusters": [], "contexts": []})
    second = lab.config("b", user={"token": "SECOND"})
    listed = os.pathsep.join([str(first), str(lab.root / "missing"), str(second)])

    def merged_ours() -> str:
        with environment(KUBECONFIG=listed):
            conn = ours(None)
        return f"{conn.context}, {conn.credentials.current().authorization}"

    def merged_lk() -> str:
        with environment(KUBECONFIG=listed):
            return lk.authorization(lk.params(None))

    yield Case("KUBECONFIG=a:missing:b", "merged, first wins: Bearer FIRST", merged_ours, merged_lk)

    (lab.root / "tokenfile").write_text("FROM-FILE")
    both = lab.config("both", user={"token": "TOKEN", "tokenFile": str(lab.root / "tokenfile")})
    yield Case(
        "token and tokenFile",
        "the file's token while it reads; the official Python client: token",
        lambda: ours(both).credentials.current().authorization,
        lambda: lk.authorization(lk.params(both)),
    )
    relative = lab.config("relative", user={"tokenFile": "tokenfile"})
    elsewhere = Path(tempfile.mkdtemp(dir=lab.root))  # the working directory: not the config's

    def from_elsewhere(read: Run) -> Run:
        def run() -> object:
            with chdir(elsewhere):
                return read()

        return run

    yield Case(
        "tokenFile relative",
        "against the kubeconfig's directory: Bearer FROM-FILE",
        from_elsewhere(lambda: ours(relative).credentials.current().authorization),
        from_elsewhere(lambda: lk.authorization(lk.params(relative))),
    )
    sni = lab.config("sni", cluster={"tls-server-name": "localhost"})
    yield Case(
        "tls-server-name",
        "the name verified",
        lambda: ours(sni).tls_server_name,
        lambda: "kept" if "localhost" in repr(lk.cluster(sni)) else "dropped",
    )


def error_cases(lab: Lab, lk: Lightkube) -> Iterator[Case]:
    """Kubeconfigs oncall must refuse with the file and the key named."""
    provider = lab.config("provider", user={"auth-provider": {"name": "oidc"}})
    no_cluster = lab.write(
        "nocluster",
        {"clusters": [], "contexts": [{"name": "x", "context": {"cluster": "nope"}}],
         "current-context": "x"},
    )  # fmt: skip
    anonymous = lab.write(
        "anon",
        {"clusters": [{"name": "c", "cluster": {"server": "https://h:1"}}],
         "contexts": [{"name": "x", "context": {"cluster": "c"}}], "current-context": "x"},
    )  # fmt: skip
    refused = {
        "auth-provider": ("removed: use the exec plugin", provider),
        "context names no cluster": ("error", no_cluster),
        "broken YAML": ("error, line", lab.write("broken", "clusters: [\n  - {name: a\n")),
        "empty file": ("error", lab.write("empty", "")),
        "server: 6443 (a number)": ("error", lab.config("number", cluster={"server": 6443})),
        "tokenFile missing": ("error", lab.config("gone", user={"tokenFile": "no-such-file"})),
    }
    for name, (kubectl, path) in refused.items():
        yield Case(name, kubectl, partial(ours, path), partial(lk.first_request, path))
    yield Case(
        "context with no user",
        "anonymous",
        lambda: ours(anonymous).credentials.current().authorization,
        lambda: lk.params(anonymous)["auth"],
    )


def exec_cases(lab: Lab, lk: Lightkube) -> Iterator[Case]:
    """Exec plugins: each stanza read by both, the credential asked for twice."""
    leaf = trustme.CA().issue_cert("client")
    pem = {
        "clientCertificateData": leaf.cert_chain_pems[0].bytes().decode(),
        "clientKeyData": leaf.private_key_pem.bytes().decode(),
    }
    token = {"token": "T"}
    missing = lab.exec_spec(V1BETA1, token, installHint="brew install x")
    missing["command"] = "no-such-auth-plugin"
    stanzas = {
        "exec v1beta1 token": ("Bearer T", lab.exec_spec(V1BETA1, token)),
        "exec v1 token": ("Bearer T", lab.exec_spec(V1, token, interactiveMode="IfAvailable")),
        "exec expired credential, asked twice": (
            "runs the plugin each time",
            lab.exec_spec(V1BETA1, {**token, "expirationTimestamp": "2000-01-01T00:00:00Z"}),
        ),
        "exec client certificate": ("cert used", lab.exec_spec(V1BETA1, pem)),
        "exec command ./plugin.py": (
            "against the kubeconfig's directory",
            lab.exec_spec(V1BETA1, token, command="./plugin.py"),
        ),
        "exec provideClusterInfo": (
            "spec.cluster given",
            lab.exec_spec(V1BETA1, token, provideClusterInfo=True),
        ),
        "exec plugin not installed": ("installHint shown", missing),
    }
    for index, (name, (kubectl, spec)) in enumerate(stanzas.items()):
        path = lab.config(f"exec{index}", user={"exec": spec})
        yield Case(name, kubectl, exec_ours(lab, path), exec_lightkube(lab, lk, path))

    def httpx_takes_it() -> object:
        import httpx

        return httpx.AsyncClient(auth=lk.params(lab.config("hx"))["auth"])

    yield Case(
        "httpx.AsyncClient(auth=…)",
        "oncall's requests stay on httpx",
        lambda: "ours is httpx already",
        httpx_takes_it,
    )


def exec_ours(lab: Lab, path: Path) -> Run:
    def run() -> str:
        lab.runs()
        with chdir(Path(tempfile.mkdtemp(dir=lab.root))):  # not the kubeconfig's directory
            credentials = ours(path).credentials  # runs the plugin once, to check its answer
            credentials.current()
            got = credentials.current()
        runs = lab.runs()
        cert = " + client cert" if got.cert_pem else ""
        return f"{got.authorization}{cert}; {len(runs)} runs; {_cluster_info(runs)}"

    return run


def exec_lightkube(lab: Lab, lk: Lightkube, path: Path) -> Run:
    def run() -> str:
        lab.runs()
        with chdir(Path(tempfile.mkdtemp(dir=lab.root))):
            params = lk.params(path)
            got = [lk.authorization(params), lk.authorization(params)]
        runs = lab.runs()
        return f"{got[-1]}; {len(runs)} runs; {_cluster_info(runs)}"

    return run


def _cluster_info(runs: list[dict[str, Any]]) -> str:
    info = json.loads(runs[0]["info"]) if runs and runs[0]["info"] else None
    if info is None:
        return "no KUBERNETES_EXEC_INFO"
    return "spec.cluster given" if "cluster" in info.get("spec", {}) else "no spec.cluster"


@contextmanager
def chdir(path: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def import_ms(code: str, runs: int) -> float | None:
    """Median cumulative `-X importtime` of `code` after PRELUDE, in ms; None if not installed."""
    totals = []
    for _ in range(runs):
        script = f"{PRELUDE}; import sys; sys.stderr.write('MARK\\n'); {code}"
        done = subprocess.run([sys.executable, "-X", "importtime", "-c", script],
                              capture_output=True, text=True, check=False)  # fmt: skip
        if done.returncode != 0:
            return None
        after = done.stderr.split("MARK\n", 1)[1]
        top = re.finditer(r"^import time:\s+\d+ \|\s+(\d+) \| (\S.*)$", after, re.M)
        totals.append(sum(int(m.group(1)) for m in top) / 1000)
    return statistics.median(totals)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    try:
        lk = Lightkube()
    except ImportError:
        print("lightkube is not installed: .venv/bin/pip install lightkube kr8s", file=sys.stderr)
        return 2
    version = importlib.import_module("importlib.metadata").version("lightkube")
    print(f"lightkube {version}; kubectl's behaviour is the reference\n")
    with tempfile.TemporaryDirectory(prefix="kube-auth-") as tmp:
        lab = Lab(Path(tmp))
        for case in (*file_cases(lab, lk), *error_cases(lab, lk), *exec_cases(lab, lk)):
            print(f"{case.name} (kubectl: {case.kubectl})")
            print(f"  ours:      {outcome(case.ours)}\n  lightkube: {outcome(case.lightkube)}")
    print(f"\nimport, on top of `{PRELUDE}`: median of {args.runs}")
    measured = {name: import_ms(code, args.runs) for name, code in IMPORTS.items()}
    base = measured["ours"]
    for name, ms in measured.items():
        if ms is None:
            print(f"  {name:18} not installed")
        else:
            ratio = f"{ms / base:5.2f}x ours" if base else ""
            print(f"  {name:18} {ms:7.1f} ms  {ratio}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
