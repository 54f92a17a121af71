"""KV usage, preemptions and waiting respond to --max-num-seqs as in vLLM: above the number of
sequences the KV cache holds the cap changes nothing (the cache is the limit); below it, fewer
sequences share the cache, so usage falls, preemptions stop and more requests wait.
Driven step by step under a steady Poisson-like load (deterministic: a seeded RNG)."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

import pytest

from oncall_drill.vllm_sim import Engine, SimConfig

#: The drill's pod under `kv-cache-pressure`: 12 000 KV tokens, 150 tokens/s, 700-token answers.
POD = SimConfig(model="m", kv_capacity_tokens=12_000, max_model_len=4096, tokens_per_second=150)


@dataclass(frozen=True)
class Outcome:
    preemptions_per_s: float
    kv_usage: float
    waiting: float
    running: float


def under_load(config: SimConfig, seconds: float = 150.0, rate: float = 10.0) -> Outcome:
    """Mean gauges and the preemption rate over the second half of `seconds` of load."""
    engine, rnd = Engine(config), random.Random(7)  # noqa: S311 - a reproducible load, not a secret
    now, dt, next_arrival = 0.0, 0.02, 0.0
    samples: list[tuple[float, int, int]] = []
    preempted_at_half = 0
    while now < seconds:
        while next_arrival <= now:
            engine.submit(rnd.randint(20, 200), 700, 700)
            next_arrival += rnd.expovariate(rate)
        engine.step(dt)
        now += dt
        assert len(engine.running) <= config.running_cap
        if now >= seconds / 2:
            if not samples:
                preempted_at_half = engine.preemptions
            state = engine.state()
            samples.append((state.kv_usage, state.waiting, state.running))
    n = len(samples)
    return Outcome(
        preemptions_per_s=(engine.preemptions - preempted_at_half) / (seconds / 2),
        kv_usage=sum(s[0] for s in samples) / n,
        waiting=sum(s[1] for s in samples) / n,
        running=sum(s[2] for s in samples) / n,
    )


def test_a_cap_above_what_the_kv_cache_holds_changes_nothing() -> None:
    wide, narrower = (
        under_load(replace(POD, max_num_seqs=256)),
        under_load(replace(POD, max_num_seqs=64)),
    )
    assert wide.preemptions_per_s > 1 and wide.kv_usage > 0.9
    assert wide.running < 64  # the KV cache, not the cap, limits what runs
    # Only the first seconds differ (while the cache fills, more than 64 fit): then the same.
    assert narrower.preemptions_per_s == pytest.approx(wide.preemptions_per_s, rel=0.1)
    assert narrower.kv_usage == pytest.approx(wide.kv_usage, rel=0.05)
    assert narrower.running == pytest.approx(wide.running, rel=0.1)


def test_lowering_below_what_fits_stops_preemptions_and_frees_kv() -> None:
    full = under_load(replace(POD, max_num_seqs=256))
    half = max(1, int(full.running / 2))  # what the runbook proposes: half of what runs
    lowered = under_load(replace(POD, max_num_seqs=half))
    assert lowered.preemptions_per_s == 0
    assert lowered.kv_usage < 0.9 < full.kv_usage
    assert lowered.waiting > full.waiting  # the price: requests wait instead


@pytest.mark.parametrize(("seqs", "active", "cap"), [(256, 8, 8), (8, None, 8), (16, 16, 16)])
def test_max_num_active_seqs_caps_running(seqs: int, active: int | None, cap: int) -> None:
    config = replace(POD, max_num_seqs=seqs, max_num_active_seqs=active)
    assert config.running_cap == cap
    engine = Engine(config)
    for _ in range(40):
        engine.submit(10, 20, 20)
    engine.step(0.001)
    assert (len(engine.running), len(engine.waiting)) == (cap, 40 - cap)


def test_active_above_max_num_seqs_is_vllms_startup_error() -> None:
    error = replace(POD, max_num_seqs=64, max_num_active_seqs=128).startup_error()
    assert (
        error is not None and "max_num_active_seqs (128)" in error and "max_num_seqs (64)" in error
    )
    assert replace(POD, max_num_seqs=64, max_num_active_seqs=64).startup_error() is None
