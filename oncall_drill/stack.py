"""`drill up / down / status / inject / clear`: run the whole simulated stack.

`up` starts real redis-server, prometheus-redis-exporter, alertmanager and prometheus (sending
its alerts to that alertmanager) plus the simulators
(the cluster: Kubernetes API, vLLM pods, GPU exporter; the AI gateway) and a bounded load
generator, all on free
loopback ports, in the background; it writes `oncall.yaml` and a kubeconfig for the app into
the drill directory and records every process in `state.json` for the other commands.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from oncall_drill import components as c
from oncall_drill.always_on import NOTIFICATIONS, SERVE_PATH, serve_settings, serve_token
from oncall_drill.components import DrillError, Ports
from oncall_drill.netutil import LOOPBACK, free_loopback_port
from oncall_drill.rules import deploy_rules
from oncall_drill.scenario_catalog import Scenario, Step, get_scenario
from oncall_drill.supervisor import (
    DrillState,
    ProcessRecord,
    pid_alive,
    spawn_detached,
    stop_process,
    wait_port_free,
)

DEFAULT_RULES = Path("alerts")  # the alert packs, when run from a checkout
LOAD_SECONDS = 3600.0  # the load generator's hard cap; `drill up` again for more
BASE_RATE = 4.0
#: A vLLM container's last termination reasons that mean it died (not a rollout's clean stop).
DEATH_REASONS = ("OOMKilled", "Error", "Completed")


@dataclass(frozen=True)
class UpOptions:
    directory: Path
    scenario: str | None = None
    for_scale: float = 1.0
    rules: tuple[Path, ...] = ()
    replicas: int = 2
    timeout: float = 30.0
    dcgm_layout: str = "helm"  # see oncall_drill/gpu_sim/layout.py
    #: Generated names from a fixed sequence: the same pod names in every stack (--contexts).
    name_seed: int | None = None
    fleet: bool = False  # 5,000 pods, 400 GPUs, 200 more rules (kube_sim/fleet.py)
    #: The vLLM Deployment owned by a simulated operator (kube_sim/operator.py) that reverts a
    #: patch of its args after operator_delay x for_scale seconds.
    managed: bool = False
    operator_delay: float = 60.0
    #: Seconds from a pod's container start to Ready (a vLLM pod's weights and CUDA graphs:
    #: minutes in production); None: the cluster's start delay.
    ready_delay: float | None = None


def _ports() -> Ports:
    names = Ports.__dataclass_fields__
    chosen: set[int] = set()
    values: dict[str, int] = {}
    for name in names:
        port = free_loopback_port()
        while port in chosen:
            port = free_loopback_port()
        chosen.add(port)
        values[name] = port
    return Ports(**values)


def _ports_of(state: DrillState) -> Ports:
    return Ports(**state.ports)


def _start(state: DrillState, name: str, argv: list[str], port: int) -> ProcessRecord:
    log = Path(state.directory) / "logs" / f"{name}.log"
    record = spawn_detached(name, argv, port, log)
    state.processes.append(record)
    state.save()
    return record


def _wait_ready(state: DrillState, ports: Ports, timeout: float) -> None:
    """Wait until every component answers; name the ones that did not, with their log."""
    deadline = time.monotonic() + timeout
    waiting = {p.name for p in state.processes if p.name != "loadgen"}
    while waiting and time.monotonic() < deadline:
        for record in state.processes:
            if record.name in waiting and not pid_alive(record.pid):
                raise DrillError(f"{record.name} exited during start-up; see {record.log}")
        waiting = {name for name in waiting if not c.ready(name, ports)}
        time.sleep(0.05)
    if waiting:
        logs = ", ".join(p.log for p in state.processes if p.name in waiting)
        raise DrillError(f"not ready within {timeout:g}s: {', '.join(sorted(waiting))} ({logs})")


DEGRADATION_KEY = "ai-gateway:degradation-level"


def _set_degradation_level(ports: Ports, level: int) -> None:
    """The service starts at level 0, explicitly (a missing key would read as 0 too)."""
    import redis

    client = redis.Redis(host=LOOPBACK, port=ports.redis, socket_timeout=2)
    try:
        client.set(DEGRADATION_KEY, str(level))
    except redis.RedisError as exc:
        raise DrillError(f"cannot set {DEGRADATION_KEY} in the drill Redis: {exc}") from exc
    finally:
        client.close()


def _warm_cache(ports: Ports) -> None:
    """Ask the popular questions once, so the drill starts as a service that has been running.

    A cold response cache would start every drill with a Redis hit rate far under 80%, and the
    platform pack's RedisHitRateLow (a 5 m window) would see that for minutes.
    """
    import asyncio

    import aiohttp

    from oncall_drill.loadgen.mix import popular_prompts

    async def warm() -> None:
        timeout = aiohttp.ClientTimeout(total=15)
        async with aiohttp.ClientSession(timeout=timeout) as session:

            async def ask(prompt: str) -> None:
                async with session.post(f"{ports.url('gateway')}/chat", json={"prompt": prompt}):
                    pass

            await asyncio.gather(*(ask(p) for p in popular_prompts()), return_exceptions=True)

    asyncio.run(warm())


def write_app_config(
    directory: Path, ports: Ports, for_scale: float, prometheus_timeout: str = "2s"
) -> Path:
    settings = {
        "context": {"name": "drill", "production": False},
        "prometheus": {"url": ports.url("prometheus"), "timeout": prometheus_timeout},
        "alertmanager": {"url": ports.url("alertmanager"), "timeout": "2s"},
        "kubernetes": {"kubeconfig": str(directory / "kubeconfig"), "namespace": "ai"},
        "redis": {"url": f"redis://{LOOPBACK}:{ports.redis}/0", "timeout": "1s"},
        "vllm": {"urls": [ports.url("vllm_service")]},
        "gpu": {"source": "dcgm"},
        "alerts": {"for_scale": for_scale, "refresh": "2s"},
        # Prometheus scrapes the drill every second: checklists may look at short windows.
        "runbooks": {"vars": {"rate_window": "20s"}},
        "audit": {"path": str(directory / "audit.jsonl")},
    }
    if ports.serve:
        settings["serve"] = serve_settings(directory, ports)
    path = directory / "oncall.yaml"
    header = "# Written by `oncall drill up`: the app's settings for this drill environment.\n"
    path.write_text(header + yaml.safe_dump(settings, sort_keys=False))
    return path


def _deploy_fleet_rules(target: Path, scale: float, replicas: int) -> None:
    from oncall_drill.kube_sim.fleet import WORKLOADS
    from oncall_drill.rules import deploy_fleet_rules

    workloads = [(w.namespace, w.name, w.replicas) for w in WORKLOADS]
    deploy_fleet_rules(target, scale, [*workloads, ("ai", "vllm", replicas)])


def up(options: UpOptions) -> DrillState:
    directory = options.directory.resolve()
    existing = DrillState.load(directory) if directory.exists() else None
    if existing and any(pid_alive(p.pid) for p in existing.processes):
        raise DrillError(f"a drill is already running in {directory}; `oncall drill down` first")
    if not 0 < options.for_scale <= 10:
        raise DrillError(f"--for-scale must be within (0, 10], got {options.for_scale:g}")
    if options.ready_delay is not None and not 0 <= options.ready_delay <= 600:
        raise DrillError(f"--ready-delay must be within [0, 600] s, got {options.ready_delay:g}")
    scenario = get_scenario(options.scenario) if options.scenario else None
    layout = c.dcgm_layout(options.dcgm_layout)
    for sub in ("logs", "targets", "rules"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    sources = list(options.rules)
    if not sources and DEFAULT_RULES.is_dir():
        sources = [DEFAULT_RULES]
    for old in (directory / "rules").glob("*.yaml"):
        old.unlink()
    deploy_rules([s.resolve() for s in sources], directory / "rules", options.for_scale)
    if options.fleet:
        _deploy_fleet_rules(directory / "rules", options.for_scale, options.replicas)
    ports = _ports()
    state = DrillState(directory=str(directory))
    state.ports = dict(vars(ports))
    state.urls = {
        "prometheus": ports.url("prometheus"),
        "alertmanager": ports.url("alertmanager"),
        "gateway": ports.url("gateway"),
        "vllm": ports.url("vllm_service"),
        "kubernetes": ports.url("cluster_api"),
        "redis": f"redis://{LOOPBACK}:{ports.redis}/0",
    }
    try:
        _start(state, "redis", c.redis_argv(ports, directory / "redis"), ports.redis)
        cluster = c.cluster_argv(
            ports,
            directory,
            options.replicas,
            layout,
            name_seed=options.name_seed,
            fleet=options.fleet,
            operator_delay=options.operator_delay * options.for_scale if options.managed else None,
            ready_delay=options.ready_delay,
        )
        _start(state, "cluster", cluster, ports.cluster_api)
        _start(state, "gateway", c.gateway_argv(ports), ports.gateway)
        _start(state, "redis-exporter", c.redis_exporter_argv(ports), ports.redis_exporter)
        _start_alerting(state, ports, directory)
        prometheus = c.prometheus_argv(ports, directory, layout, options.fleet)
        _start(state, "prometheus", prometheus, ports.prometheus)
        _wait_ready(state, ports, options.timeout)
        _set_degradation_level(ports, 0)
        code, body = c.http_get(f"{ports.url('gateway')}/drill/config")
        if code != 200:
            raise DrillError(f"gateway /drill/config: HTTP {code}")
        state.gateway_config = json.loads(body)
        _warm_cache(ports)
        rate = scenario.load.rate if scenario else BASE_RATE
        _start(state, "loadgen", c.loadgen_argv(ports, rate, LOAD_SECONDS), 0)
        # A fleet's /api/v1/rules (5,000 instances, ~2 MB) takes seconds on 2 busy cores.
        timeout = "10s" if options.fleet else "2s"
        config = write_app_config(directory, ports, options.for_scale, timeout)
        _start(state, "serve", c.serve_argv(config), ports.serve)
        _wait_ready(state, ports, options.timeout)
        if scenario is not None:
            _apply(state, ports, scenario)
    except BaseException:
        _stop_all(state)
        raise
    state.save()
    return state


def _start_alerting(state: DrillState, ports: Ports, directory: Path) -> None:
    """The chat sink, and Alertmanager with `oncall serve` as its receiver (serve starts
    once oncall.yaml is written; Alertmanager retries until it answers)."""
    sink = c.notify_sink_argv(ports, directory / NOTIFICATIONS)
    _start(state, "notify-sink", sink, ports.notify_sink)
    webhook = f"{ports.url('serve')}{SERVE_PATH}"
    token = serve_token(directory)
    am = c.alertmanager_argv(ports.alertmanager, directory / "alertmanager", (webhook,), token)
    _start(state, "alertmanager", am, ports.alertmanager)


def _stop_all(state: DrillState) -> list[dict[str, Any]]:
    report = []
    for record in reversed(state.processes):
        stop_process(record)
        freed = record.port == 0 or wait_port_free(record.port)
        report.append(
            {"name": record.name, "pid": record.pid, "stopped": not pid_alive(record.pid),
             "port": record.port, "port_free": freed}
        )  # fmt: skip
    return report


def load_state(directory: Path) -> DrillState:
    state = DrillState.load(directory.resolve())
    if state is None:
        raise DrillError(f"no drill in {directory.resolve()}; start one with `oncall drill up`")
    return state


def down(directory: Path) -> list[dict[str, Any]]:
    state = load_state(directory)
    report = _stop_all(state)
    state.path.unlink(missing_ok=True)
    return report


def status(directory: Path) -> dict[str, Any]:
    state = load_state(directory)
    ports = _ports_of(state)
    processes = [
        {"name": p.name, "pid": p.pid, "port": p.port, "alive": pid_alive(p.pid), "log": p.log}
        for p in state.processes
    ]
    code, body = c.http_get(f"{ports.url('prometheus')}/api/v1/targets?state=active")
    targets = []
    if code == 200:
        for target in json.loads(body)["data"]["activeTargets"]:
            targets.append(
                {"job": target["labels"].get("job"), "instance": target["labels"].get("instance"),
                 "health": target["health"], "error": target.get("lastError", "")}
            )  # fmt: skip
    return {
        "directory": state.directory,
        "scenario": state.scenario,
        "faults": state.faults,
        "urls": state.urls,
        "processes": processes,
        "targets": targets,
    }


def _vllm_pods(state: DrillState) -> list[tuple[str, str]]:
    """(pod name, base URL) of every Ready vLLM pod, from the Prometheus discovery file."""
    targets = json.loads((Path(state.directory) / "targets" / "vllm.json").read_text())
    return sorted((t["labels"]["pod"], f"http://{t['targets'][0]}") for t in targets)


def _run_step(state: DrillState, ports: Ports, step: Step) -> None:
    if step.kind == "http":
        base = {"gateway": ports.url("gateway"), "gpu-exporter": ports.url("gpu"),
                "cluster-api": ports.url("cluster_api")}[step.component or "gateway"]  # fmt: skip
        code, body = c.http_post(f"{base}{step.path}", step.json_body or {})
        if code >= 300:
            raise DrillError(f"{step.component} {step.path}: HTTP {code}: {body[:200]!r}")
    elif step.kind == "vllm_fault":
        for _, url in _vllm_pods(state):
            c.http_post(f"{url}/drill/fault", {"fault": step.fault})
    elif step.kind == "oom_kill":
        pods = _vllm_pods(state)
        if not pods:
            raise DrillError("no Ready vLLM pod to OOM-kill")
        name = pods[step.pod_index % len(pods)][0]
        kill = {"namespace": "ai", "pod": name, "container": "vllm"}
        code, text = c.http_post(f"{ports.url('cluster_api')}/drill/oom-kill", kill)
        if code >= 300:
            raise DrillError(f"oom-kill {name}: HTTP {code}: {text[:200]!r}")
    elif step.kind == "node_condition":
        condition = {"node": "gpu-node-1", "type": step.condition, "status": step.status}
        c.http_post(f"{ports.url('cluster_api')}/drill/node-condition", condition)


def _restart_load(state: DrillState, ports: Ports, rate: float, curve: str) -> None:
    old = state.process("loadgen")
    if old is not None:
        stop_process(old)
        state.processes.remove(old)
    _start(state, "loadgen", c.loadgen_argv(ports, rate, LOAD_SECONDS, curve), 0)


def _apply(state: DrillState, ports: Ports, scenario: Scenario) -> None:
    if scenario.load.rate != BASE_RATE or scenario.load.curve != "constant":
        _restart_load(state, ports, scenario.load.rate, scenario.load.curve)
    for step in scenario.inject:
        _run_step(state, ports, step)
    state.scenario = scenario.name
    if scenario.name not in state.faults and scenario.inject:
        state.faults.append(scenario.name)
    state.save()


def inject(directory: Path, name: str) -> Scenario:
    state = load_state(directory)
    scenario = get_scenario(name)
    _apply(state, _ports_of(state), scenario)
    return scenario


CLEAR_STEPS = [
    Step(kind="http", component="gpu-exporter", path="/drill/fault", json={"fault": "none"}),
    Step(kind="vllm_fault", fault="none"),
    Step(kind="node_condition", condition="MemoryPressure", status=False),
    # The drill's own replica count (`pending` scales past the node's GPUs).
    Step(kind="http", component="cluster-api", path="/drill/scale", json={"replicas": None}),
]


def _operator_token(state: DrillState) -> str:
    kubeconfig = yaml.safe_load((Path(state.directory) / "kubeconfig").read_text())
    for user in kubeconfig["users"]:
        if "readonly" not in user["name"]:
            return str(user["user"]["token"])
    raise DrillError("the drill kubeconfig has no operator user")


def _rebuild_oom_killed(state: DrillState, ports: Ports) -> list[str]:
    """Delete (through the Kubernetes API, as an operator would) every vLLM pod whose container
    died (OOMKilled; Completed as a vLLM engine death after start-up ends, Error before), so the
    alert's series go with it."""
    headers = {"Authorization": f"Bearer {_operator_token(state)}"}
    base = f"{ports.url('cluster_api')}/api/v1/namespaces/ai/pods"
    code, body = c.http_request("GET", f"{base}?labelSelector=app%3Dvllm", headers=headers)
    if code != 200:
        raise DrillError(f"list pods: HTTP {code}")
    rebuilt = []
    for pod in json.loads(body)["items"]:
        statuses = pod.get("status", {}).get("containerStatuses") or []
        if any(
            (s.get("lastState") or {}).get("terminated", {}).get("reason") in DEATH_REASONS
            for s in statuses
        ):
            name = pod["metadata"]["name"]
            code, _ = c.http_request("DELETE", f"{base}/{name}", headers=headers)
            if code >= 300:
                raise DrillError(f"delete pod {name}: HTTP {code}")
            rebuilt.append(name)
    return rebuilt


def clear(directory: Path) -> None:
    """Undo every fault: reset the simulators, rebuild OOM-killed pods, base load."""
    state = load_state(directory)
    ports = _ports_of(state)
    # The gateway's start configuration, not /drill/reset: that also empties the response
    # cache, and a cold cache would itself look like the Redis hit-rate incident.
    restore = Step(
        kind="http", component="gateway", path="/drill/config", json=state.gateway_config
    )
    for step in [restore, *CLEAR_STEPS]:
        _run_step(state, ports, step)
    _rebuild_oom_killed(state, ports)
    _restart_load(state, ports, BASE_RATE, "constant")
    state.scenario = None
    state.faults = []
    state.save()
