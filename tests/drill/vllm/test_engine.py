"""The scheduler alone, driven step by step in simulated time (deterministic)."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from oncall_drill.vllm_sim import Engine, Fault, SimConfig
from oncall_drill.vllm_sim.engine import FinishedRequest, Sequence

BASE = SimConfig(model="m", max_num_seqs=4, kv_capacity_tokens=10_000, max_model_len=4096)


class Recorder:
    """A StatsObserver that keeps what it is told."""

    def __init__(self) -> None:
        self.finished: list[FinishedRequest] = []
        self.preemptions = 0
        self.tokens = 0
        self.ttfts: list[float] = []

    def on_scheduled(self, prompt_tokens: int, prefix_hit_tokens: int) -> None:
        pass

    def on_first_token(self, ttft: float) -> None:
        self.ttfts.append(ttft)

    def on_tokens(self, count: int, inter_token_latency: float | None) -> None:
        self.tokens += count

    def on_iteration(self, tokens: int) -> None:
        pass

    def on_preemption(self) -> None:
        self.preemptions += 1

    def on_finished(self, request: FinishedRequest) -> None:
        self.finished.append(request)


def drain(seq: Sequence) -> list[str]:
    out: list[str] = []
    while not seq.events.empty():
        event = seq.events.get_nowait()
        out.extend(event.tokens)
    return out


def run_until_idle(engine: Engine, dt: float = 0.01, max_steps: int = 100_000) -> int:
    for step in range(max_steps):
        if not engine.running and not engine.waiting:
            return step
        engine.step(dt)
        assert len(engine.running) <= engine.config.max_num_seqs
        assert 0 <= engine.kv_used <= engine.config.kv_capacity_tokens
    raise AssertionError("engine did not drain")


def test_paces_tokens_at_the_configured_rate() -> None:
    engine = Engine(replace(BASE, tokens_per_second=50, prefill_tokens_per_second=1e9))
    seq = engine.submit(prompt_tokens=10, max_tokens=200, target_tokens=200)
    steps = run_until_idle(engine, dt=0.01)
    # 1 token at prefill, 199 more at 50 tok/s: ~3.98 s of simulated time.
    assert 3.9 <= steps * 0.01 <= 4.1
    assert len(drain(seq)) == 200


def test_at_most_max_num_seqs_run_and_the_rest_wait() -> None:
    engine = Engine(BASE)
    seqs = [engine.submit(10, 20, 20) for _ in range(10)]
    engine.step(0.001)
    assert len(engine.running) == 4
    assert len(engine.waiting) == 6
    run_until_idle(engine)
    assert all(len(drain(s)) == 20 for s in seqs)


def test_per_sequence_rate_falls_and_throughput_saturates() -> None:
    engine = Engine(replace(BASE, max_num_seqs=512, saturation_batch=32, tokens_per_second=50))
    rates = []
    for batch in (1, 8, 64, 256):
        engine.running = [Sequence(i, 1, 1, 1, 0.0) for i in range(batch)]
        rates.append((batch, engine.per_seq_rate()))
    per_seq = [rate for _, rate in rates]
    aggregate = [batch * rate for batch, rate in rates]
    assert per_seq == sorted(per_seq, reverse=True)
    assert aggregate == sorted(aggregate)
    assert aggregate[-1] < 50 * 32  # saturates below tokens_per_second x saturation_batch
    # Diminishing returns: each added sequence adds less throughput than the previous ones.
    gain_small = (aggregate[1] - aggregate[0]) / (8 - 1)
    gain_large = (aggregate[-1] - aggregate[-2]) / (256 - 64)
    assert gain_large < gain_small / 4


def test_full_kv_cache_preempts_and_everything_still_finishes() -> None:
    recorder = Recorder()
    config = replace(BASE, kv_capacity_tokens=120, max_model_len=120, max_num_seqs=8)
    engine = Engine(config, recorder)
    seqs = [engine.submit(10, 60, 60) for _ in range(4)]
    run_until_idle(engine)
    assert engine.preemptions > 0
    assert recorder.preemptions == engine.preemptions
    assert sum(r.num_preemptions for r in recorder.finished) == engine.preemptions
    assert [len(drain(s)) for s in seqs] == [60] * 4
    assert all(r.finish_reason == "length" for r in recorder.finished)


def test_stop_before_max_tokens_and_latencies_add_up() -> None:
    recorder = Recorder()
    engine = Engine(BASE, recorder)
    engine.submit(100, max_tokens=50, target_tokens=20)
    run_until_idle(engine)
    (done,) = recorder.finished
    assert done.finish_reason == "stop"
    assert done.generation_tokens == 20
    assert abs(done.e2e - (done.queue + done.inference)) < 1e-9
    assert abs(done.inference - (done.prefill + done.decode)) < 1e-9
    assert 0 < done.ttft <= done.e2e


def test_stuck_fault_slows_generation_below_five_tokens_per_second() -> None:
    engine = Engine(BASE)
    engine.set_fault(Fault.STUCK)
    assert engine.per_seq_rate() < 5
    seq = engine.submit(10, 10, 10)
    for _ in range(100):  # one simulated second
        engine.step(0.01)
    assert len(drain(seq)) < 5
    engine.set_fault(Fault.NONE)
    assert engine.per_seq_rate() == BASE.tokens_per_second


def test_engine_death_fails_in_flight_and_new_requests() -> None:
    engine = Engine(BASE)
    died: list[bool] = []
    engine.death_listeners.append(lambda: died.append(True))
    running = engine.submit(10, 100, 100)
    engine.step(0.1)
    engine.set_fault(Fault.ENGINE_DEATH)
    assert died == [True]
    events = [running.events.get_nowait() for _ in range(running.events.qsize())]
    assert events[-1].kind == "error"
    late = engine.submit(10, 10, 10)
    assert late.events.get_nowait().kind == "error"
    engine.set_fault(Fault.NONE)
    assert engine.dead  # death is final


def test_hang_freezes_the_engine() -> None:
    engine = Engine(BASE)
    seq = engine.submit(10, 100, 100)
    engine.set_fault(Fault.HANG)
    engine.step(1.0)
    assert seq.generated == 0
    engine.set_fault(Fault.NONE)
    engine.step(1.0)
    assert seq.generated > 0


def test_abort_frees_the_kv_cache() -> None:
    recorder = Recorder()
    engine = Engine(BASE, recorder)
    seq = engine.submit(100, 1000, 1000)
    engine.step(0.5)
    assert engine.kv_used > 100
    engine.abort(seq)
    assert engine.kv_used == 0
    assert recorder.finished[-1].finish_reason == "abort"


@settings(max_examples=40, deadline=None)
@given(
    max_num_seqs=st.integers(1, 6),
    capacity=st.integers(60, 400),
    requests=st.lists(st.tuples(st.integers(1, 30), st.integers(1, 30)), min_size=1, max_size=12),
    dt=st.sampled_from([0.005, 0.02, 0.1, 0.5]),
)
def test_invariants_hold_under_any_load(
    max_num_seqs: int, capacity: int, requests: list[tuple[int, int]], dt: float
) -> None:
    config = replace(BASE, max_num_seqs=max_num_seqs, kv_capacity_tokens=capacity)
    engine = Engine(config)
    seqs = [engine.submit(prompt, out, out) for prompt, out in requests]
    run_until_idle(engine, dt=dt)
    assert engine.kv_used == 0
    assert [len(drain(s)) for s in seqs] == [out for _, out in requests]


def test_ttft_is_reported_at_the_first_token_and_aborts_keep_it() -> None:
    """vLLM observes TTFT in the step that emits the first token, not when the request ends:
    a request aborted after its first token is in TTFT, one aborted before is not."""
    recorder = Recorder()
    engine = Engine(replace(BASE, max_num_seqs=1), recorder)
    first = engine.submit(100, 1000, 1000)
    queued = engine.submit(100, 1000, 1000)  # waits behind `first` (one running slot)
    for _ in range(1000):  # bounded: the first token comes after ~0.02 s of simulated time
        if first.generated:
            break
        engine.step(0.01)
    assert len(recorder.ttfts) == 1 and recorder.finished == []
    assert first.first_token_at is not None
    assert recorder.ttfts[0] == first.first_token_at - first.arrival
    engine.abort(first)
    engine.abort(queued)
    assert len(recorder.ttfts) == 1
    assert [r.finish_reason for r in recorder.finished] == ["abort", "abort"]
