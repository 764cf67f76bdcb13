"""The speculative simulation's fast paths give the numbers of the plain ones, bit for bit: the windowed
decoders (per-round totals planned a draws buffer at a time) against slot arrays advanced round by round, the
cached and vectorised round costs against `SpeculativeStepCost`'s own terms, and a stream costed in quiet runs
against the same stream one round at a time."""

from __future__ import annotations

import numpy as np
import pytest

from planner.inference.scenario import InferenceScenario
from planner.inference.serving import scheduler
from planner.inference.serving.decoders import Speculation, SpeculativeDecoders
from planner.inference.traffic import TrafficEngine
from planner.inference.workload import Traffic

EAGLE = {"method": "eagle", "num_speculative_tokens": 3, "acceptance_rate": 0.8}


class _RoundByRound:
    """The decoders as slot arrays, every round one draw per slot (free ones too) from the same generator,
    consumed in order: what `SpeculativeDecoders` must reproduce."""

    def __init__(self, block: int, spec: Speculation, index: int, draws_at_a_time: int) -> None:
        self.block, self.k, self.a = block, spec.drafted_tokens, spec.acceptance
        self.reserved = spec.reserved_tokens
        self.empty = -(self.reserved + block - 1)
        self.rng = np.random.default_rng([spec.seed, index])
        self.at_a_time = draws_at_a_time
        self.draws, self.drawn = np.zeros(0, dtype=np.int64), 0
        self.slot: dict[int, int] = {}
        self.request: list[int] = []
        self.free: list[int] = []
        self.context = np.zeros(0, dtype=np.int64)
        self.remaining = np.zeros(0, dtype=np.int64)
        self.output: list[int] = []
        self.finished: list[int] = []

    def join(self, request: int, context: int, generated: int, output: int) -> None:
        if not self.free:
            old, size = len(self.request), max(2 * len(self.request), 8)
            self.context = np.concatenate([self.context, np.full(size - old, self.empty, dtype=np.int64)])
            self.remaining = np.concatenate([self.remaining, np.zeros(size - old, dtype=np.int64)])
            self.output += [0] * (size - old)
            self.request += [-1] * (size - old)
            self.free = list(range(size - 1, old - 1, -1)) + self.free
        s = self.free.pop()
        self.slot[request], self.request[s], self.output[s] = s, request, output
        self.context[s], self.remaining[s] = context, output - generated

    def remove(self, request: int) -> tuple[int, int]:
        s = self.slot.pop(request)
        self.request[s] = -1
        self.free.append(s)
        context, generated = int(self.context[s]), self.output[s] - int(self.remaining[s])
        self.context[s], self.remaining[s] = self.empty, 0
        return context, generated

    def blocks(self) -> int:
        return int(((self.context + (self.reserved + self.block - 1)) // self.block).sum())

    def advance(self) -> list[int]:
        n = len(self.request)
        if self.drawn + n > len(self.draws):
            u = 1.0 - self.rng.random(max(self.at_a_time, n))
            accepted = np.minimum(np.floor(np.log(u) / np.log(self.a)), self.k).astype(np.int64)
            self.draws, self.drawn = np.concatenate([self.draws[self.drawn :], accepted + 1]), 0
        gains = np.minimum(self.draws[self.drawn : self.drawn + n], self.remaining)
        self.drawn += n
        self.context += gains
        self.remaining -= gains
        self.finished += [self.request[s] for s in np.flatnonzero((self.remaining == 0) & (gains > 0)).tolist()]
        return np.bincount(gains, minlength=self.k + 2).tolist()


@pytest.mark.parametrize("draws_at_a_time", [40, 1 << 14])
def test_the_windowed_decoders_advance_as_slot_arrays_round_by_round(monkeypatch, draws_at_a_time):
    """Joins, preemptions, finishes, slot growth and windows of a few rounds (a small draws buffer) or many."""
    monkeypatch.setattr(SpeculativeDecoders, "DRAWS", draws_at_a_time)
    spec = Speculation(drafted_tokens=3, acceptance=0.7, seed=11)
    fast, slow = SpeculativeDecoders(16, spec, 2), _RoundByRound(16, spec, 2, draws_at_a_time)
    rng = np.random.default_rng(5)
    next_request = 0
    for _ in range(3000):
        action = rng.random()
        if action < 0.15 or not fast.slot:
            output = int(rng.integers(1, 60))
            generated = int(rng.integers(0, output))
            context = int(rng.integers(1, 500))
            fast.join(next_request, context, generated, output)
            slow.join(next_request, context, generated, output)
            next_request += 1
        elif action < 0.2:
            victim = list(slow.slot)[int(rng.integers(len(slow.slot)))]
            assert fast.remove(victim) == slow.remove(victim)
        else:
            assert fast.advance()[1:] == slow.advance()[1:]  # gain 0 (free slots, finished ones) is not a burst
            assert fast.pop_finished() == slow.finished
            for request in slow.finished:
                assert fast.leave(request) == slow.remove(request)[0]
            slow.finished = []
        assert fast.blocks() == slow.blocks()
        assert fast.context_tokens() == int(slow.context[slow.context > slow.empty].sum())
        assert len(fast) == len(slow.slot)


def _cost(scenario: InferenceScenario):
    engine = TrafficEngine.of(scenario, traffic=Traffic(num_requests=10))
    return engine.speculative_cost(engine.requests())


@pytest.mark.parametrize(
    "scenario",
    [
        InferenceScenario(speculative=EAGLE),
        InferenceScenario(model="gpt-oss-20b", num_gpus=1, tensor_parallel=1, speculative=EAGLE),
        InferenceScenario(model="mixtral-8x7b", speculative={"method": "eagle", "num_speculative_tokens": 2}),
        InferenceScenario(speculative={"method": "draft_model", "draft_model": "llama-3.2-1b"}),
    ],
    ids=["eagle-tp4", "eagle-sliding-window", "eagle-moe", "draft-model"],
)
def test_a_decode_round_costs_its_verify_step_and_draft_steps_bit_for_bit(scenario):
    cost = _cost(scenario)
    k = cost.drafted_tokens
    for batch in (1, 2, 7, 33, 64):
        contexts = np.array([batch, batch * 129, batch * 2047 + 5, batch * 4000 + 3, batch * 9000], dtype=np.int64)
        one_at_a_time = [
            cost.target.verify_step_seconds(batch, c, k + 1) + k * cost.draft_step_seconds(batch, c)
            for c in contexts.tolist()
        ]
        assert [cost.decode_round_seconds(batch, c) for c in contexts.tolist()] == one_at_a_time
        assert [cost.round_seconds(batch, c, []) for c in contexts.tolist()] == one_at_a_time
        assert cost.decode_rounds_seconds(batch, contexts).tolist() == one_at_a_time


def test_the_draft_s_prefill_is_cached_by_its_pieces():
    cost = _cost(InferenceScenario(speculative=EAGLE))
    for spans in ([(0, 1500)], [(0, 1500), (2000, 2048)], [(0, 1500)]):
        # the draft's pass inside the round: composed without the scheduling the round pays once
        assert cost.draft_prefill_seconds(spans) == cost.draft.mixed_seconds(0, 0, spans)
        assert cost.draft.step(0, 0, spans).scheduler_seconds == 0.0
    assert len(cost._draft_prefill) == 2


@pytest.mark.parametrize(
    "traffic",
    [
        {"requests_per_second": 0.8, "num_requests": 300, "seed": 1},  # light: long quiet runs
        {"requests_per_second": 4.0, "num_requests": 400, "seed": 2, "lengths": "uniform", "range_ratio": 0.5},
        {"requests_per_second": 8.0, "num_requests": 300, "seed": 3, "max_concurrency": 24},
    ],
    ids=["light", "loaded", "client-cap"],
)
def test_quiet_runs_cost_what_rounds_one_at_a_time_cost(monkeypatch, traffic):
    """The vectorised stretches of rounds (`decode_runs.quiet_run`) change no number: the same stream with them off."""
    engine = TrafficEngine.of(InferenceScenario(speculative=EAGLE), traffic=Traffic(**traffic))
    runs = engine.simulate()
    monkeypatch.setattr(scheduler, "LONG_RUN_ROUNDS", 1 << 40)
    assert engine.simulate() == runs
    monkeypatch.setattr(scheduler, "LONG_RUN_ROUNDS", 2)
    assert engine.simulate() == runs
