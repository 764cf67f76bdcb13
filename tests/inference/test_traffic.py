"""The traffic simulation against the static plan, queueing theory and hostile input."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from planner import plan
from planner.errors import PlanningError
from planner.inference.inputs import ReplicaShape
from planner.inference.memory import inference_memory
from planner.inference.scenario import InferenceScenario
from planner.inference.scenario_inputs import scenario_inputs
from planner.inference.serving.scheduler import ReplicaContext, simulate_replica
from planner.inference.steps import StepContext, decode_step, prefill_step
from planner.inference.traffic import TrafficEngine
from planner.inference.workload import (
    MAX_TRACE_BYTES,
    Slo,
    TraceRow,
    Traffic,
    generate_requests,
    parse_trace_csv,
    trace_to_csv,
)
from planner.physics.efficiency import DEFAULT_EFFICIENCY
from planner.share import query_params_to_scenario, scenario_to_query_params

BASE = InferenceScenario()  # Llama 3.1 70B, 4x H100, TP4, 2048 in / 512 out, batch cap 64


def _engine(scenario: InferenceScenario = BASE, **traffic) -> TrafficEngine:
    return TrafficEngine.of(scenario, traffic=Traffic(**traffic))


# ------------------------------------------------------------------------------------ step costs


@pytest.mark.parametrize(
    "scenario",
    [
        BASE,
        InferenceScenario(tensor_parallel=2, pipeline_parallel=2),
        InferenceScenario(model="mixtral-8x7b"),
        InferenceScenario(model="qwen3-next-80b-a3b", gpu="h200", num_gpus=2, tensor_parallel=2),
        InferenceScenario(model="gpt-oss-20b", num_gpus=1, tensor_parallel=1),
    ],
    ids=["tp4", "tp2pp2", "moe", "hybrid-deltanet", "sliding-window"],
)
def test_a_step_costs_what_the_plan_s_step_functions_say(scenario):
    """No second physics: a pure decode step is steps.decode_step, a lone prompt is steps.prefill_step."""
    engine = TrafficEngine.of(scenario, traffic=Traffic(num_requests=10))
    cost = engine.step_cost(engine.requests())
    i = scenario_inputs(scenario)
    shape = ReplicaShape.of(i.arch, i.inputs, i.hw)
    weights = inference_memory(i.arch, i.counts, i.hw, i.inputs, shape).weights_bytes
    pp = scenario.pipeline_parallel
    for batch, context in [(1, 100), (7, 3000), (64, 2300), (33, 129)]:
        micro_shape = replace(shape, micro_batch=-(-batch // pp))
        x = replace(i.inputs, prompt_tokens=context, output_tokens=0)
        expected = decode_step(StepContext(i.arch, i.counts, i.hw, i.efficiency, x, micro_shape), weights).seconds
        assert cost.decode_seconds(batch, np.array([batch * context]))[0] == pytest.approx(expected, rel=1e-5)
        assert cost.mixed_seconds(batch, batch * context, []) == pytest.approx(expected, rel=1e-5)
    prompt = scenario.prompt_tokens  # fits one chunk, whole blocks: the plan's TTFT step exactly
    ctx = StepContext(i.arch, i.counts, i.hw, i.efficiency, i.inputs, shape)
    expected = prefill_step(ctx, weights, prompt, 1).seconds
    assert cost.mixed_seconds(0, 0, [(0, prompt)]) == pytest.approx(expected, rel=1e-9)
    # A prefix-cache hit: the piece [prompt - new, prompt) computes and writes only its own positions' KV.
    new = prompt // 8
    expected = prefill_step(ctx, weights, new, 1).seconds
    assert cost.mixed_seconds(0, 0, [(prompt - new, prompt)]) == pytest.approx(expected, rel=1e-9)


# --------------------------------------------------------------------------- against the static plan


def test_at_a_vanishing_rate_every_request_sees_the_idle_plan():
    static = plan(BASE.model_copy(update={"concurrency": 1})).performance
    result = _engine(requests_per_second=0.01, arrival="uniform", num_requests=40).simulate()  # 100 s apart
    # Nothing queues: a request waits only for the API server's per-request work before its first step.
    assert result.queue_seconds.p99 == pytest.approx(DEFAULT_EFFICIENCY.request_overhead_seconds, abs=1e-9)
    assert result.ttft_seconds.p50 == pytest.approx(plan(BASE).performance.ttft_seconds, rel=1e-6)
    assert result.ttft_seconds.p99 == pytest.approx(result.ttft_seconds.p50, rel=1e-6)
    # A lone sequence decodes at batch 1; the plan's step is at the request's mean context, the
    # simulation's steps walk from prompt+1 to prompt+output-1 (same mean): equal to interpolation error.
    assert result.tpot_seconds.mean == pytest.approx(static.decode_step_seconds, rel=2e-3)
    assert result.peak_batch == 1 and result.preemptions == 0


def test_saturated_throughput_is_the_static_plan_s_maximum():
    """Every request at t=0 keeps the batch cap full: the static plan's steady state."""
    result = _engine(requests_per_second=None, num_requests=3000).simulate()
    static = plan(BASE).performance
    assert result.mean_batch == pytest.approx(BASE.concurrency, rel=0.02)
    assert result.output_tokens_per_second == pytest.approx(static.output_tokens_per_second, rel=0.05)


def test_little_s_law_links_the_step_log_to_the_request_times():
    """Time-average of sequences held (from the step log) = throughput x mean time held (from the
    requests' own times): two independent bookkeepings of one simulation."""
    engine = _engine(requests_per_second=2.5, num_requests=3000, lengths="uniform", range_ratio=0.5, seed=3)
    reqs = engine.requests()
    timeline = simulate_replica(
        reqs.arrival_seconds,
        reqs.prompt_tokens,
        reqs.output_tokens,
        reqs.cached_prompt_tokens,
        np.arange(len(reqs)),
        ReplicaContext(engine.limits, engine.step_cost(reqs)),
    )
    busy = timeline.step_seconds.sum()
    held_time_average = np.dot(timeline.step_running, timeline.step_seconds) / busy
    throughput = len(reqs) / busy
    mean_held = np.mean(timeline.finish_seconds - timeline.scheduled_seconds)
    assert held_time_average == pytest.approx(throughput * mean_held, rel=0.02)


def test_latency_grows_with_load_and_the_knee_sits_before_saturation():
    curve = _engine(num_requests=400).load_curve(num_requests=400)
    p99 = [p.ttft_p99_seconds for p in curve.points]
    assert p99[-1] > 5 * p99[0]
    assert all(b >= 0.9 * a for a, b in zip(p99, p99[1:]))  # noisy but rising
    assert curve.knee_requests_per_second is not None
    assert curve.knee_requests_per_second <= 1.1 * plan(BASE).performance.requests_per_second


def test_the_same_seed_gives_the_same_answer_and_another_seed_another():
    a = _engine(requests_per_second=3, num_requests=500, seed=7).simulate()
    b = _engine(requests_per_second=3, num_requests=500, seed=7).simulate()
    c = _engine(requests_per_second=3, num_requests=500, seed=8).simulate()
    assert a == b
    assert a.ttft_seconds != c.ttft_seconds


def test_replicas_split_the_stream_round_robin():
    scenario = BASE.model_copy(update={"num_gpus": 8, "concurrency": 128})
    result = TrafficEngine.of(scenario, traffic=Traffic(requests_per_second=None, num_requests=2000)).simulate()
    one = _engine(requests_per_second=None, num_requests=1000).simulate()
    assert result.replicas == 2
    assert result.request_throughput_per_second == pytest.approx(2 * one.request_throughput_per_second, rel=0.02)


def test_kv_blocks_run_out_before_the_batch_cap_and_sequences_wait_or_are_preempted():
    """64 x 32k-token sequences need ~640 GiB of KV on 4x H100: the blocks, not max_num_seqs, bind."""
    scenario = BASE.model_copy(update={"prompt_tokens": 24_000, "output_tokens": 8_000})
    result = TrafficEngine.of(scenario, traffic=Traffic(requests_per_second=None, num_requests=200)).simulate()
    assert result.peak_batch < 64
    assert result.kv_utilization_peak > 0.9


# ----------------------------------------------------------------------------------------- the SLO


def test_capacity_is_the_largest_rate_that_meets_the_slo():
    slo = Slo(ttft_seconds=1.0, percentile=99)
    engine = _engine(num_requests=400, slo=slo)
    answer = engine.capacity(target_requests_per_second=20)
    rate = answer.max_requests_per_second_per_replica
    assert 0 < rate < 1.5 * engine.static_requests_per_second_per_replica
    assert engine._one_replica(rate, 400).ttft_seconds.p99 <= 1.0
    assert engine._one_replica(rate * 1.15, 400).ttft_seconds.p99 > 1.0
    assert answer.replicas_needed == math.ceil(20 / rate)
    assert answer.gpus_needed == answer.replicas_needed * 4
    assert answer.usd_per_month == pytest.approx(answer.replicas_needed * answer.usd_per_replica_month)


def test_slo_attainment_and_goodput():
    result = _engine(requests_per_second=3, num_requests=600, slo=Slo(ttft_seconds=0.3, percentile=90)).simulate()
    assert 0 < result.slo_attainment < 1
    assert result.goodput_requests_per_second == pytest.approx(
        result.slo_attainment * result.request_throughput_per_second, rel=1e-9
    )
    (check,) = result.slo
    assert check.metric == "ttft_seconds" and check.met == (result.ttft_seconds.p90 <= 0.3)


def test_capacity_without_a_target_is_a_sentence():
    with pytest.raises(PlanningError, match="SLO target"):
        _engine().capacity()


# --------------------------------------------------------------------------------- traces and links


def test_a_trace_round_trips_and_drives_the_simulation():
    rows = (
        TraceRow(arrival_seconds=0.0, prompt_tokens=100, output_tokens=20, prefix_id="sys"),
        TraceRow(arrival_seconds=0.5, prompt_tokens=3000, output_tokens=7, prefix_id=None),
        TraceRow(arrival_seconds=1.25, prompt_tokens=120, output_tokens=200, prefix_id="sys"),
    )
    assert parse_trace_csv(trace_to_csv(rows)) == rows
    traffic = Traffic(lengths="trace", trace=rows, shared_prefix_fraction=0.5)
    reqs = generate_requests(traffic, 2048, 512)
    assert reqs.prompt_tokens.tolist() == [100, 3000, 120]
    assert reqs.cached_prompt_tokens.tolist() == [0, 0, 60]
    result = TrafficEngine.of(BASE, traffic=traffic).simulate()
    assert result.num_requests == 3


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", "empty"),
        ("a,b,c\n1,2,3\n", "no column"),
        ("arrival_seconds,prompt_tokens,output_tokens\n", "no requests"),
        ("arrival_seconds,prompt_tokens,output_tokens\n0,-5,10\n", "row 2"),
        ("arrival_seconds,prompt_tokens,output_tokens\n0,12,ten\n", "row 2"),
        ("arrival_seconds,prompt_tokens,output_tokens\n0,12\n", "row 2"),
        ("arrival_seconds,prompt_tokens,output_tokens\nnan,12,5\n", "row 2"),
    ],
)
def test_hostile_traces_get_a_sentence(text, words):
    with pytest.raises(PlanningError, match=words):
        parse_trace_csv(text)


def test_a_trace_too_large_is_refused_before_it_is_parsed():
    huge = "arrival_seconds,prompt_tokens,output_tokens\n" + "0,1,1\n" * (MAX_TRACE_BYTES // 6 + 10)
    with pytest.raises(PlanningError, match="MiB"):
        parse_trace_csv(huge)


def test_traffic_travels_in_the_share_link_and_its_absence_changes_nothing():
    assert "traffic" not in scenario_to_query_params(BASE)
    scenario = BASE.model_copy(
        update={"traffic": Traffic(requests_per_second=4, lengths="uniform", range_ratio=0.3, slo=Slo(ttft_seconds=2))}
    )
    params = scenario_to_query_params(scenario)
    back, warnings = query_params_to_scenario(params)
    assert warnings == [] and back == scenario


def test_a_layout_without_room_for_kv_still_plans_and_says_why_it_served_no_traffic():
    # Llama 3.1 70B in bf16 on one H100 leaves no KV cache at all.
    scenario = InferenceScenario(num_gpus=1, tensor_parallel=1, traffic=Traffic(num_requests=10))
    p = plan(scenario)
    assert p.traffic is None
    assert any("request stream was not simulated" in w and "KV cache" in w for w in p.warnings)


def test_capacity_never_exceeds_the_rate_a_replica_sustains():
    engine = _engine(num_requests=200, slo=Slo(e2e_latency_seconds=3600))  # a target every rate meets
    answer = engine.capacity()
    assert answer.max_requests_per_second_per_replica <= engine.static_requests_per_second_per_replica


# ------------------------------------------------------------------- the fast loop against a slow one


class _StepByStep:
    """The scheduler of `serving` (vLLM V1) written the slow and obvious way, as an independent check of
    its fast loop (decode runs advanced at once, O(1) decoder bookkeeping, closed-form KV block counts):
    one engine step per iteration, every sequence's context and generated tokens counted one by one, every
    pure decode step costed alone (`decode_seconds` of one context sum) and the clock advanced step by step.
    """

    def __init__(self, reqs, limits, cost, client_cap=None):
        self.arrivals = reqs.arrival_seconds.tolist()
        self.prompts = reqs.prompt_tokens.tolist()
        self.outputs = reqs.output_tokens.tolist()
        self.cached = reqs.cached_prompt_tokens.tolist()
        self.n = len(self.arrivals)
        self.limits, self.cost, self.cap = limits, cost, client_cap or self.n + 1
        self.sent = list(self.arrivals)
        self.scheduled, self.first, self.finish = ([math.nan] * self.n for _ in range(3))
        self.waiting = []  # [request, context in KV, left to prefill, generated], head first
        self.running = []  # the same plus the admission number, in admission order
        self.completions, self.admissions, self.preemptions = [], 0, 0
        self.next, self.now = 0, 0.0
        self.steps = []  # (seconds, sequences sampled, sequences holding KV) per step
        self.preempted = False

    def blocks(self, tokens):
        return -(-tokens // self.limits.block_tokens)

    def send_time(self, i):
        if i >= self.n:
            return math.inf
        if i < self.cap:
            return self.arrivals[i]
        if len(self.completions) <= i - self.cap:
            return math.inf
        return max(self.arrivals[i], self.completions[i - self.cap])

    def run(self):
        while len(self.completions) < self.n:
            while self.send_time(self.next) <= self.now + 1e-12:
                i = self.next
                self.sent[i] = self.send_time(i)
                prefill = max(self.prompts[i] - self.cached[i], 1)
                self.waiting.append([i, self.prompts[i] - prefill, prefill, 0])
                self.next += 1
            if not self.running and not self.waiting:
                self.now = max(self.now, self.send_time(self.next))
                continue
            chunks = self.schedule()
            if chunks is None:  # the running sequences' own tokens of this step do not fit
                self.preempt_newest()
                continue
            if chunks:
                self.prompt_step(chunks)
            elif not self.running:
                self.admit()  # a prompt larger than all KV memory, served alone
                continue
            elif not self.decode_step():
                self.preempt_newest()
                continue
            self.preempted = False

    def schedule(self):
        """The step's chunks; None when the running sequences' tokens of this step need more KV than there is."""
        limits, chunked = self.limits, self.limits.chunked_prefill
        budget = limits.max_num_batched_tokens - (sum(not s[2] for s in self.running) if chunked else 0)
        chunks = []
        used = 0  # blocks every running sequence holds once this step's tokens are written
        for s in self.running:
            chunk = min(s[2], budget) if chunked and s[2] and budget > 0 else 0
            if chunk:
                chunks.append((s, chunk))
                budget -= chunk
            decodes_now = chunked and not s[2]
            used += self.blocks(s[1] + chunk + (1 if decodes_now else 0))
        if used > limits.kv_blocks and len(self.running) > 1:
            return None
        while (
            self.waiting
            and not self.preempted  # no admission in a step that preempted (vLLM V1)
            and len(self.running) < limits.max_num_seqs
            and (budget > 0 or not chunked)
        ):
            _, context, prefill, _ = self.waiting[0]
            need = self.blocks(context + prefill)
            if self.running and used + need > limits.kv_blocks - limits.admission_watermark_blocks:
                break
            if not chunked and chunks and prefill > budget:
                break
            s = self.admit()
            chunks.append((s, min(prefill, budget) if chunked else prefill))
            budget -= chunks[-1][1]
            used += need
        return chunks

    def admit(self):
        s = [*self.waiting.pop(0), self.admissions]
        self.admissions += 1
        self.running.append(s)
        if math.isnan(self.scheduled[s[0]]):
            self.scheduled[s[0]] = self.now
        return s

    def prompt_step(self, chunks):
        decoding = [s for s in self.running if not s[2]] if self.limits.chunked_prefill else []
        spans = [(s[1], s[1] + chunk) for s, chunk in chunks]
        seconds = self.cost.mixed_seconds(len(decoding), sum(s[1] for s in decoding), spans)
        self.now += seconds
        for s in decoding:
            s[1], s[3] = s[1] + 1, s[3] + 1
        for s, chunk in chunks:
            s[1], s[2] = s[1] + chunk, s[2] - chunk
            if not s[2]:
                s[3] += 1
                if math.isnan(self.first[s[0]]):
                    self.first[s[0]] = self.now
        # A prompt that yields the last token it had to make finishes at once; decodes that did are counted.
        done_at_prompt = sum(not s[2] and s[3] >= self.outputs[s[0]] for s, _ in chunks)
        sampled = len(decoding) + sum(not s[2] for s, _ in chunks)
        self.steps.append((seconds, sampled, len(self.running) - done_at_prompt))
        self.finish_done()

    def decode_step(self):
        """One step of the decodes; False when the tokens it writes need KV blocks that are not free."""
        decoding = [s for s in self.running if not s[2]]
        held = sum(self.blocks(s[1]) for s in self.running)
        new_blocks = sum(self.blocks(s[1] + 1) - self.blocks(s[1]) for s in decoding)
        if held + new_blocks > self.limits.kv_blocks:
            return False
        seconds = float(self.cost.decode_seconds(len(decoding), np.array([sum(s[1] for s in decoding)]))[0])
        self.now += seconds
        for s in decoding:
            s[1], s[3] = s[1] + 1, s[3] + 1
        self.steps.append((seconds, len(decoding), len(decoding)))
        self.finish_done()
        return True

    def finish_done(self):
        for s in [s for s in self.running if not s[2] and s[3] >= self.outputs[s[0]]]:
            self.running.remove(s)
            self.finish[s[0]] = self.now
            self.completions.append(self.now)

    def preempt_newest(self):
        """Recompute preemption: the newest sequence prefills again everything it held (and what it had left)."""
        victim = max(self.running, key=lambda s: s[4])
        self.running.remove(victim)
        self.waiting.insert(0, [victim[0], 0, victim[1] + victim[2], victim[3]])
        self.preemptions += 1
        self.preempted = True


LONG = InferenceScenario(prompt_tokens=8000, output_tokens=2000, concurrency=256)  # KV runs out: preemptions


@pytest.mark.parametrize(
    ("scenario", "traffic", "client_cap"),
    [
        (BASE, {"requests_per_second": 0.5, "seed": 1}, None),
        (BASE, {"requests_per_second": 2.5, "seed": 2, "lengths": "uniform", "range_ratio": 0.5}, None),
        (BASE, {"requests_per_second": None, "seed": 3, "shared_prefix_fraction": 0.5}, None),
        (BASE, {"requests_per_second": 1.5, "seed": 4, "chunked_prefill": False}, None),
        (BASE, {"requests_per_second": None, "seed": 5}, 24),
        (LONG, {"requests_per_second": None, "seed": 6}, None),
        (LONG, {"requests_per_second": None, "seed": 7, "chunked_prefill": False, "num_requests": 48}, None),
        (InferenceScenario(tensor_parallel=2, pipeline_parallel=2), {"requests_per_second": 2.0, "seed": 8}, None),
        (InferenceScenario(model="gpt-oss-20b", num_gpus=1, tensor_parallel=1), {"requests_per_second": 8.0}, None),
    ],
    ids=[
        "light",
        "uniform",
        "burst-prefix",
        "whole-prompts",
        "client-cap",
        "preempt",
        "preempt-whole",
        "pp2",
        "window",
    ],
)
def test_the_fast_loop_serves_exactly_as_one_step_at_a_time(scenario, traffic, client_cap):
    """Same steps, same batches, same preemptions, same request times (up to the order of adding up steps)."""
    engine = TrafficEngine.of(scenario, traffic=Traffic(**{"num_requests": 150, **traffic}))
    reqs = engine.requests()
    cost = engine.step_cost(reqs)
    fast = simulate_replica(
        reqs.arrival_seconds,
        reqs.prompt_tokens,
        reqs.output_tokens,
        reqs.cached_prompt_tokens,
        np.arange(len(reqs)),
        ReplicaContext(engine.limits, cost, client_cap),
    )
    slow = _StepByStep(reqs, engine.limits, cost, client_cap)
    slow.run()
    seconds, sampled, running = (np.array(column) for column in zip(*slow.steps))
    assert fast.preemptions == slow.preemptions
    assert np.array_equal(fast.step_batch, sampled)
    assert np.array_equal(fast.step_running, running)
    assert np.array_equal(fast.step_seconds, seconds)  # each step's cost is the same number
    for got, want in [
        (fast.sent_seconds, slow.sent),
        (fast.scheduled_seconds, slow.scheduled),
        (fast.first_token_seconds, slow.first),
        (fast.finish_seconds, slow.finish),
    ]:
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    if scenario is LONG:
        assert fast.preemptions > 0  # the case exercises preemption
