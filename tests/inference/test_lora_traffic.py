"""Multi-LoRA serving in the traffic simulation: each request's adapter drawn from the shares, at most max_loras
distinct adapters in a running batch (vLLM V1 skips a waiting request whose adapter would exceed it and takes the
next), the GPU and host LRU slots (`serving.adapter_slots`), and a step that waits for the adapters it loads."""

from __future__ import annotations

import numpy as np
import pytest

import planner.inference.traffic as traffic_module
from planner import plan
from planner.inference.adapters import draw_adapter_ids
from planner.inference.scenario import InferenceScenario
from planner.inference.serving.adapter_slots import AdapterLimits, AdapterSlots
from planner.inference.serving.scheduler import Replica, ReplicaContext, simulate_replica
from planner.inference.traffic import TrafficEngine
from planner.inference.workload import Traffic

BASE = InferenceScenario()  # Llama 3.1 70B, 4x H100, TP4, 2048 in / 512 out, batch cap 64
SUMMARIZE = traffic_module.summarize


def _lora(adapters: int = 10, **fields) -> InferenceScenario:
    return InferenceScenario(lora={"adapters": adapters, **fields})


def _simulate(scenario: InferenceScenario, monkeypatch, **traffic):
    """The simulation's result and the replicas' timelines it summarised."""
    timelines = []

    def keep(replica_timelines, *args, **kwargs):
        timelines.extend(replica_timelines)
        return SUMMARIZE(replica_timelines, *args, **kwargs)

    monkeypatch.setattr(traffic_module, "summarize", keep)
    result = TrafficEngine.of(scenario, traffic=Traffic(**traffic)).simulate()
    return result, timelines


# ------------------------------------------------------------------------------- the slots by hand


def test_adapter_slots_keep_lru_order_and_evict_only_idle_adapters():
    """Two GPU slots, a host cache of three; a slot fill costs 1 s, a storage read 10 s."""
    limits = AdapterLimits(slots=2, host_slots=3, host_copy_seconds=1.0, storage_read_seconds=10.0)
    #           request: 0  1  2  3  4  5
    slots = AdapterSlots(limits, [0, 1, 2, 0, 3, 1])
    slots.admit(0)  # adapter 0: storage, then a slot
    slots.admit(1)  # adapter 1 likewise: both slots taken
    assert (slots.loads, slots.storage_reads) == (2, 2)
    assert not slots.admissible(2)  # a third distinct adapter would exceed the slots
    assert slots.admissible(3)  # adapter 0 runs already
    slots.admit(3)  # no load; adapter 0 becomes the most recently used
    assert list(slots.gpu) == [1, 0] and slots.loads == 2
    assert slots.take_pending_seconds() == 22.0 and slots.take_pending_seconds() == 0.0
    slots.release(1)  # adapter 1 idle: its slot may go
    assert slots.admissible(2)
    slots.admit(2)  # evicts adapter 1 (idle), not adapter 0 (running)
    assert list(slots.gpu) == [0, 2] and list(slots.host) == [0, 1, 2]
    slots.release(0)
    assert slots.running == {0: 1, 2: 1}  # request 3 still runs adapter 0
    slots.release(3)
    slots.admit(4)  # adapter 3: evicts idle adapter 0 from its slot and, host full, the host's LRU (0)
    assert list(slots.gpu) == [2, 3] and list(slots.host) == [1, 2, 3]
    assert (slots.loads, slots.storage_reads) == (4, 4)
    assert slots.take_pending_seconds() == 22.0
    assert not slots.admissible(5)  # adapters 2 and 3 run
    slots.release(2)
    slots.admit(5)  # adapter 1: the host still holds it, so a slot fill only
    assert list(slots.gpu) == [3, 1] and list(slots.host) == [2, 3, 1]
    assert (slots.loads, slots.storage_reads) == (5, 4)
    assert slots.take_pending_seconds() == 1.0


def test_a_waiting_request_whose_adapter_does_not_fit_is_skipped_not_waited_for():
    """Six short prompts at t=0 over adapters [0, 0, 1, 2, 1, 0] with two slots: the first step admits every
    request but the one of adapter 2 (vLLM V1 skips it and takes requests 4 and 5 behind it), and that step
    waits for the two adapters it loads; adapter 2 gets its slot once an adapter's requests all finished."""
    engine = TrafficEngine.of(BASE, traffic=Traffic(num_requests=10))
    cost = engine.step_cost(engine.requests())
    limits = AdapterLimits(slots=2, host_slots=3, host_copy_seconds=0.01, storage_read_seconds=0.1)
    n = 6
    timeline = simulate_replica(
        np.zeros(n),
        np.full(n, 100),
        np.full(n, 20),
        np.zeros(n, dtype=int),
        np.arange(n),
        ReplicaContext(engine.limits, cost, adapters=limits),
        adapter_ids=np.array([0, 0, 1, 2, 1, 0]),
    )
    scheduled = timeline.scheduled_seconds
    assert scheduled[[0, 1, 2, 4, 5]].tolist() == [0.0] * 5
    assert scheduled[3] > 0
    assert scheduled[3] >= min(timeline.finish_seconds[[0, 1, 5]].max(), timeline.finish_seconds[[2, 4]].max())
    first = cost.mixed_seconds(0, 0, [(0, 100)] * 5)
    assert timeline.step_seconds[0] == pytest.approx(first + 2 * (0.01 + 0.1), rel=1e-12)
    assert (timeline.adapter_loads, timeline.adapter_storage_reads) == (3, 3)
    # without adapters the same stream is scheduled at once and its first step waits for nothing
    plain = simulate_replica(
        np.zeros(n),
        np.full(n, 100),
        np.full(n, 20),
        np.zeros(n, dtype=int),
        np.arange(n),
        ReplicaContext(engine.limits, cost),
    )
    assert plain.scheduled_seconds.tolist() == [0.0] * n
    assert plain.step_seconds[0] == pytest.approx(cost.mixed_seconds(0, 0, [(0, 100)] * 6), rel=1e-12)


# ----------------------------------------------------------------------- the batch's distinct adapters


def _watch_batches(monkeypatch) -> list[tuple[int, int]]:
    """(distinct adapters the running sequences use, slots) before every step of every replica, read from the
    scheduler's own queues (decoding and prefilling sequences), and checked against the slots' bookkeeping."""
    seen: list[tuple[int, int]] = []

    def check(replica: Replica) -> None:
        slots = replica.adapters
        if slots is None:
            return
        running = list(replica._plain.offset) + [entry[0] for entry in replica.prefilling]
        counts: dict[int, int] = {}
        for request in running:
            adapter = slots.adapter_of[request]
            counts[adapter] = counts.get(adapter, 0) + 1
        assert counts == slots.running  # the slots count exactly the sequences that hold KV
        assert set(counts) <= set(slots.gpu)  # every running adapter holds a GPU slot
        assert len(slots.gpu) <= slots.limits.slots and len(slots.host) <= slots.limits.host_slots
        seen.append((len(counts), slots.limits.slots))

    mixed, decode = Replica._mixed_step, Replica._decode_steps

    def mixed_step(self, chunks):
        check(self)
        return mixed(self, chunks)

    def decode_steps(self, running):
        check(self)
        return decode(self, running)

    monkeypatch.setattr(Replica, "_mixed_step", mixed_step)
    monkeypatch.setattr(Replica, "_decode_steps", decode_steps)
    return seen


@pytest.mark.parametrize("max_loras", [1, 3, 8])
def test_no_batch_holds_more_distinct_adapters_than_max_loras(monkeypatch, max_loras):
    seen = _watch_batches(monkeypatch)
    scenario = _lora(10, max_loras=max_loras, zipf_exponent=0.5)
    result, timelines = _simulate(scenario, monkeypatch, requests_per_second=4.0, num_requests=400, seed=2)
    assert len(seen) > 100
    assert max(distinct for distinct, _ in seen) == max_loras  # the limit binds and is never passed
    assert all(slots == max_loras for _, slots in seen)
    assert result.num_requests == 400 and np.isfinite(result.ttft_seconds.p99)
    assert result.adapters is not None and result.adapters.gpu_slots_per_replica == max_loras
    assert result.adapters.loads == sum(t.adapter_loads for t in timelines) >= 10  # each adapter loaded once at least


def test_the_limit_holds_through_preemptions_and_on_several_replicas(monkeypatch):
    """Long sequences run the KV blocks out (recompute preemption releases the victim's adapter); two replicas
    each keep their own slots."""
    seen = _watch_batches(monkeypatch)
    scenario = InferenceScenario(
        num_gpus=8, prompt_tokens=24_000, output_tokens=8_000, lora={"adapters": 6, "max_loras": 2}
    )
    result, timelines = _simulate(scenario, monkeypatch, requests_per_second=None, num_requests=120)
    assert result.replicas == 2 and len(timelines) == 2
    assert result.preemptions > 0
    assert seen and max(d for d, _ in seen) == 2


# ------------------------------------------------------------------------------------ loads and stalls


def test_adapters_load_only_when_they_do_not_all_fit(monkeypatch):
    stream = dict(requests_per_second=3.0, num_requests=400, seed=4)
    _, resident = _simulate(_lora(10, max_loras=10), monkeypatch, **stream)
    (timeline,) = resident
    ids = draw_adapter_ids(400, np.full(10, 0.1), 4)
    distinct = len(set(ids.tolist()))
    # all ten hold a slot once loaded: one cold load each, read once from storage
    assert timeline.adapter_loads == timeline.adapter_storage_reads == distinct == 10
    _, short = _simulate(_lora(10, max_loras=2), monkeypatch, **stream)
    # slots swap, though seldom: an adapter keeps its slot while any of its requests runs, and under steady
    # traffic new ones keep joining (the starvation vLLM's scheduler documents)
    assert short[0].adapter_loads > distinct
    assert short[0].adapter_storage_reads == distinct  # the host keeps every adapter by default
    scenario = _lora(10, max_loras=2, max_cpu_loras=3)
    result, small_host = _simulate(scenario, monkeypatch, **stream)
    t = small_host[0]
    assert t.adapter_storage_reads > distinct
    assert t.adapter_storage_reads <= t.adapter_loads
    # each load waits for its slot fill, each storage read for the read: the steps' stall, exactly
    a = TrafficEngine.of(scenario).inputs.inputs.adapters
    stall = t.adapter_loads * a.host_copy_seconds + t.adapter_storage_reads * a.storage_read_seconds
    assert t.adapter_stall_seconds == pytest.approx(stall, rel=1e-9)
    stats = result.adapters
    assert (stats.loads, stats.storage_reads) == (t.adapter_loads, t.adapter_storage_reads)
    assert stats.stall_seconds == pytest.approx(stall, rel=1e-9)
    assert stats.stall_share == pytest.approx(stall / t.step_seconds.sum(), rel=1e-9)


def test_without_adapters_nothing_loads_and_one_resident_adapter_costs_only_its_kernels(monkeypatch):
    stream = dict(requests_per_second=1.0, num_requests=200, seed=1)
    base, plain = _simulate(BASE, monkeypatch, **stream)
    assert plain[0].adapter_loads == 0
    one, timelines = _simulate(_lora(1, max_loras=1), monkeypatch, **stream)
    assert timelines[-1].adapter_loads == 1
    # the same stream: a little slower per step, never faster
    assert one.ttft_seconds.p50 > base.ttft_seconds.p50
    assert one.tpot_seconds.mean > base.tpot_seconds.mean
    assert one.ttft_seconds.p50 < 1.2 * base.ttft_seconds.p50


def test_ttft_grows_as_max_loras_shrinks(monkeypatch):
    """Ten even adapters at a moderate rate (about half the plan's saturated rate)."""
    p50 = []
    for max_loras in (10, 4, 2, 1):
        result, _ = _simulate(_lora(10, max_loras=max_loras), monkeypatch, requests_per_second=1.5, num_requests=400)
        p50.append(result.ttft_seconds.p50)
    assert all(b > a for a, b in zip(p50, p50[1:])), p50
    assert p50[-1] > 20 * p50[0]


def test_loads_stall_the_steps_that_admit_them(monkeypatch):
    """A slower storage read makes every request that misses the host wait longer: its step lasts the read."""
    stream = dict(requests_per_second=1.0, num_requests=300, seed=3)
    fast, _ = _simulate(_lora(10, max_loras=2, max_cpu_loras=2), monkeypatch, **stream)
    scenario = _lora(10, max_loras=2, max_cpu_loras=2, storage_bytes_per_second=2e8)
    slow, (t,) = _simulate(scenario, monkeypatch, **stream)
    assert t.adapter_storage_reads > 10
    assert slow.ttft_seconds.mean > fast.ttft_seconds.mean
    # Llama 3.1 70B, rank 16, all linear layers, bf16: 414,187,520 bytes, 2.07 s at 0.2 GB/s; a TP4 slot
    # (213,647,360 bytes) over the 64 GB/s host link
    read, copy = 2 * 207_093_760 / 2e8, 2 * 106_823_680 / 64e9
    assert t.adapter_stall_seconds == pytest.approx(t.adapter_loads * copy + t.adapter_storage_reads * read, rel=1e-9)
    assert t.step_seconds.max() > read
    assert np.sum(t.step_seconds > read) <= t.adapter_storage_reads


@pytest.mark.parametrize(
    "fields",
    [
        {"speculative": {"method": "eagle", "num_speculative_tokens": 3, "acceptance_rate": 0.7}},
        {"runtime": "sglang"},
    ],
    ids=["speculative", "sglang"],
)
def test_other_schedulers_keep_the_slots_too(monkeypatch, fields):
    scenario = InferenceScenario(**fields, lora={"adapters": 10, "max_loras": 2})
    result, timelines = _simulate(scenario, monkeypatch, requests_per_second=1.0, num_requests=200)
    assert timelines[0].adapter_loads > 10
    resident, _ = _simulate(
        InferenceScenario(**fields, lora={"adapters": 10, "max_loras": 10}),
        monkeypatch,
        requests_per_second=1.0,
        num_requests=200,
    )
    assert result.ttft_seconds.p50 > resident.ttft_seconds.p50


# ------------------------------------------------------------------------------------- the adapter draw


def test_adapter_draws_are_deterministic_and_follow_the_shares():
    shares = 1.0 / np.arange(1, 21) ** 1.1
    shares /= shares.sum()
    a = draw_adapter_ids(200_000, shares, seed=7)
    assert np.array_equal(a, draw_adapter_ids(200_000, shares, seed=7))
    assert not np.array_equal(a, draw_adapter_ids(200_000, shares, seed=8))
    assert a.min() >= 0 and a.max() < 20
    frequencies = np.bincount(a, minlength=20) / len(a)
    assert np.max(np.abs(frequencies - shares)) < 0.005
    # a zero share is never drawn
    skip = np.array([0.5, 0.0, 0.5])
    assert 1 not in set(draw_adapter_ids(10_000, skip, seed=1).tolist())


def test_the_simulation_is_deterministic_and_the_draw_leaves_the_stream_alone(monkeypatch):
    scenario = _lora(10, max_loras=3, zipf_exponent=1.0)
    stream = dict(requests_per_second=2.0, num_requests=300)
    a, ta = _simulate(scenario, monkeypatch, seed=5, **stream)
    b, tb = _simulate(scenario, monkeypatch, seed=5, **stream)
    c, _ = _simulate(scenario, monkeypatch, seed=6, **stream)
    assert a == b and ta[0].adapter_loads == tb[0].adapter_loads
    assert a.ttft_seconds != c.ttft_seconds
    # the arrivals and lengths are those of the stream without adapters (the draw has its own generator)
    _, plain = _simulate(BASE, monkeypatch, seed=5, **stream)
    assert np.array_equal(ta[0].sent_seconds, plain[0].sent_seconds)
    assert np.array_equal(ta[0].output_tokens, plain[0].output_tokens)
    engine = TrafficEngine.of(scenario, traffic=Traffic(seed=5, **stream))
    limits, ids = engine.adapter_slot_limits, engine.requests().adapter
    assert (limits.slots, limits.host_slots) == (3, 10)
    assert np.array_equal(ids, draw_adapter_ids(len(ids), engine.inputs.inputs.adapters.shares, 5))


# -------------------------------------------------------------------------------------------- warnings


def test_the_plan_warns_when_a_batch_needs_more_adapters_than_slots():
    short = plan(_lora(10, max_loras=4))
    assert "lora_slots_short" in short.warning_codes
    (text,) = [w for w in short.warnings if "max_loras" in w]
    assert "about 10 distinct adapters" in text and "holds 4" in text and "Raise max_loras to 10" in text
    assert "lora_slots_short" not in plan(_lora(10, max_loras=10)).warning_codes
    assert "lora_slots_short" not in plan(BASE).warning_codes
    # skewed traffic brings fewer distinct adapters into a batch of 64
    assert "lora_slots_short" not in plan(_lora(100, max_loras=8, zipf_exponent=3.0)).warning_codes
    # a batch cap of 4 in the traffic: 10 (1 - 0.9^4) = 3.4 distinct adapters fit 4 slots
    capped = InferenceScenario(lora={"adapters": 10, "max_loras": 4}, traffic={"max_num_seqs": 4})
    assert "lora_slots_short" not in plan(capped).warning_codes


def test_the_warning_foretells_the_starvation_the_simulation_shows(monkeypatch):
    """Where the plan warns, the simulated tail waits far longer than where it does not."""
    stream = dict(requests_per_second=2.0, num_requests=400, seed=9)
    warned, _ = _simulate(_lora(10, max_loras=4), monkeypatch, **stream)
    fine, _ = _simulate(_lora(10, max_loras=10), monkeypatch, **stream)
    assert warned.ttft_seconds.p99 > 10 * fine.ttft_seconds.p99
