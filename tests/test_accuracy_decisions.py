"""Decisions checked against measurements (benchmarks/accuracy_decisions.py): sweeps are grouped from the replayed
runs by one rule, the SLO decision and the replicas follow hand-worked numbers, the likely ranges are the planner's,
and the committed summary and report carry the section the engine produces today."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarks import accuracy_decisions as D
from planner.inference.scenario import InferenceScenario
from planner.inference.traffic_ranges import TrafficRanges
from planner.inference.traffic_results import SloCheck
from planner.inference.workload import Traffic
from planner.uncertainty import TrafficRange, serving_errors, traffic_range

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Run:  # what accuracy.ServingRun carries
    scenario: InferenceScenario
    traffic: Traffic
    engine: str = "vllm"


def _result(run, source, metric, measured, simulated):
    case = SimpleNamespace(
        run=run, publisher=source, regime="dense, 1 GPU, NVIDIA, vllm", metric=metric, reference=measured, case_id=""
    )
    return SimpleNamespace(case=case, predicted=simulated, error=(simulated - measured) / measured)


def _runs(source, scenario, loads, **metrics):
    """One result per (run, metric): loads are (requests_per_second, max_concurrency, num_requests)."""
    out = []
    for i, (rate, clients, n) in enumerate(loads):
        run = Run(scenario, Traffic(requests_per_second=rate, max_concurrency=clients, num_requests=n))
        for metric, (measured, simulated) in metrics.items():
            out.append(_result(run, source, metric, measured[i], simulated[i]))
    return out


SCENARIO = InferenceScenario(model="qwen3-0.6b", gpu="h100-sxm", prompt_tokens=512, output_tokens=128)
LONGER = InferenceScenario(model="qwen3-0.6b", gpu="h100-sxm", prompt_tokens=512, output_tokens=256)


def test_sweeps_group_one_sources_runs_of_one_deployment_by_the_one_knob_that_varies():
    three = ([1.0, 2.0, 3.0], [1.0, 2.0, 3.0])
    results = [
        # source a: a concurrency sweep (request counts differ, as NIM's 10 per client), given out of order
        *_runs("a", SCENARIO, [(None, 8, 80), (None, 1, 10), (None, 32, 320)], mean_ttft_ms=three),
        # the same source and load, another deployment (output length): not part of a's sweep, alone
        *_runs("a", LONGER, [(None, 8, 80)], mean_ttft_ms=([1.0], [1.0])),
        # source b, the same deployment and loads: a sweep of its own, never pooled with a's
        *_runs("b", SCENARIO, [(None, 1, 10), (None, 8, 80)], mean_ttft_ms=([1.0, 2.0], [1.0, 2.0])),
        # source c: a rate sweep with a burst (rate inf) as its heaviest load
        *_runs("c", SCENARIO, [(None, None, 500), (16.0, None, 500), (4.0, None, 500)], mean_ttft_ms=three),
        # source d: two runs at one load (request counts differ): no single order
        *_runs("d", SCENARIO, [(None, 4, 40), (None, 4, 400), (None, 8, 80)], mean_ttft_ms=three),
    ]
    found, skipped = D.sweeps(results)
    by_source = {s.source: s for s in found}
    assert sorted(by_source) == ["a", "b", "c"]
    assert [p.label for p in by_source["a"].points] == ["c=1", "c=8", "c=32"]
    assert [p.measured["mean_ttft_ms"] for p in by_source["a"].points] == [2.0, 1.0, 3.0]  # kept with its run
    assert by_source["a"].kind == "concurrency" and by_source["a"].output_tokens == 128
    assert [p.label for p in by_source["b"].points] == ["c=1", "c=8"]
    assert by_source["c"].kind == "rate"
    assert [p.label for p in by_source["c"].points] == ["4 req/s", "16 req/s", "burst"]
    assert [(name.split(":")[0], why) for name, why in skipped] == [
        ("d", "two runs at the same load: the sweep has no single order")
    ]


def test_the_decision_is_the_largest_load_with_every_lighter_one_meeting():
    assert D.largest_meeting([True, True, False, True]) == 1  # a meet past the first miss does not count
    assert D.largest_meeting([True, True, True]) == 2
    assert D.largest_meeting([False, True]) == D.NONE
    assert D.meets(300.0, 15.0, (300.0, 15.0)) and not D.meets(300.1, 15.0, (300.0, 15.0))
    relative, absolute = D.RULES
    assert relative.targets(100.0, 10.0) == (300.0, 15.0)  # 3 x TTFT, 1.5 x TPOT of the lightest load
    assert absolute.targets(100.0, 10.0) == (2000.0, 50.0)
    assert D.category(0) == "exact" and D.category(-1) == "one step off" and D.category(2) == "further"
    assert D.replicas_for(16.0, 3.0) == 6 and D.replicas_for(16.0, 4.0) == 4 and D.replicas_for(16.0, None) is None


def _range(kind, low, high):
    return TrafficRange(kind=kind, low_error=low, high_error=high, regime=None, basis="test", loo_coverage=None)


def test_one_sweep_decided_by_hand():
    # Four concurrencies; the relative rule's targets from the lightest measured load: 3 x 100 = 300 ms TTFT,
    # 1.5 x 10 = 15 ms TPOT.
    #   measured  TTFT 100 200 290 400, TPOT 10 12 14 16 -> meets, meets, meets, misses: c=4
    #   simulated TTFT  90 150 250 299, TPOT  9 11 13 14.9 -> meets at every load: c=8, one step heavier
    points = tuple(
        D.Point(
            c,
            f"c={c}",
            {"mean_ttft_ms": mt, "mean_tpot_ms": mp, "request_throughput": mr},
            {"mean_ttft_ms": st, "mean_tpot_ms": sp, "request_throughput": sr},
        )
        for c, mt, mp, mr, st, sp, sr in [
            (1, 100, 10, 1.0, 90, 9, 1.1),
            (2, 200, 12, 1.8, 150, 11, 2.0),
            (4, 290, 14, 3.0, 250, 13, 3.3),
            (8, 400, 16, 4.0, 299, 14.9, 5.0),
        ]
    )
    sweep = D.Sweep("a", "toy", "concurrency", "", 1, 128, points)
    # Ranges: TTFT and TPOT +-10 % (P / 1.1 .. P / 0.9), throughput -20 % .. +50 %.
    ranges = TrafficRanges("", _range("ttft", -0.1, 0.1), _range("tpot", -0.1, 0.1), _range("throughput", -0.2, 0.5))
    d = D.decide(sweep, D.RULES[0], "mean_ttft_ms", "mean_tpot_ms", ranges)
    assert d["targets_ms"] == {"ttft": 300.0, "tpot": 15.0}
    assert (d["measured"], d["headroom"], d["steps"], d["category"]) == (2, 3, 1, "one step off")
    assert (d["measured_load"], d["headroom_load"]) == ("c=4", "c=8")
    # c=4: TTFT 250 -> 227..278 and TPOT 13 -> 11.8..14.4, both within: meets; c=8: 299 -> 272..332 straddles 300
    assert d["verdicts"] == ["meets", "meets", "meets", "at risk"]
    assert d["likely"] == [2, 3] and d["measured_within_likely"]
    # target 4 x 4.0 req/s = 16; measured ceil(16 / 3.0) = 6 at c=4; Headroom ceil(16 / 5.0) = 4 at c=8;
    # Headroom's rate at the measured load: ceil(16 / 3.3) = 5
    assert d["target_requests_per_second"] == 16.0
    assert (d["replicas_measured"], d["replicas_headroom"], d["replicas_headroom_at_measured_load"]) == (6, 4, 5)
    assert d["replica_error"] == pytest.approx(-1 / 3) and d["replica_error_at_measured_load"] == pytest.approx(-1 / 6)
    # the planner's replicas_likely on 4: ceil(4 x 0.8) = 4 .. ceil(4 x 1.5) = 6; the measured 6 is inside
    assert d["replicas_likely"] == [4, 6] and d["measured_replicas_within_likely"]
    # five options (none, c=1 .. c=8): a uniform guess is exact 1 in 5 and within one step of c=4 3 in 5
    assert (d["chance_exact"], d["chance_within_one"]) == (pytest.approx(0.2), pytest.approx(0.6))
    # the absolute rule (2 s, 50 ms) is met at every load, measured and simulated: the heaviest, exact
    d = D.decide(sweep, D.RULES[1], "mean_ttft_ms", "mean_tpot_ms", ranges)
    assert (d["measured_load"], d["headroom_load"], d["category"]) == ("c=8", "c=8", "exact")


def test_a_sweep_whose_lightest_load_misses_decides_none_and_sizes_nothing():
    points = tuple(
        D.Point(c, f"c={c}", {"p99_ttft_ms": t, "p99_tpot_ms": 60.0, "output_throughput": 128.0 * c}, sim)
        for c, t, sim in [
            (1, 900.0, {"p99_ttft_ms": 900.0, "p99_tpot_ms": 40.0, "output_throughput": 256.0}),
            (2, 1900.0, {"p99_ttft_ms": 2100.0, "p99_tpot_ms": 45.0, "output_throughput": 512.0}),
        ]
    )
    sweep = D.Sweep("a", "toy", "concurrency", "", 2, 128, points)
    wide = TrafficRanges("", _range("ttft", -0.5, 0.5), _range("tpot", -0.5, 0.5), _range("throughput", -0.5, 0.5))
    d = D.decide(sweep, D.RULES[1], "p99_ttft_ms", "p99_tpot_ms", wide)
    # measured TPOT 60 ms > 50 ms at the lightest load: none; simulated meets at c=1 only (2.1 s > 2 s at c=2)
    assert (d["measured_load"], d["headroom_load"], d["category"]) == ("none (below c=1)", "c=1", "one step off")
    assert d["replicas_measured"] is None and d["replica_error"] is None
    # per replica (2 per run): measured 128 x c tokens/s / 128 tokens / 2 = 0.5, 1.0 req/s: target 4 x 1.0 = 4;
    # Headroom's rate at c=1: 256 / 128 / 2 = 1 req/s per replica: ceil(4 / 1) = 4 replicas
    assert d["target_requests_per_second"] == pytest.approx(4.0) and d["replicas_headroom"] == 4


def test_the_verdict_is_the_planners():
    ranges = TrafficRanges("", _range("ttft", -0.3, 0.2), _range("tpot", -0.3, 0.2), _range("throughput", -0.3, 0.2))
    for simulated in (0.5, 0.9, 1.0, 1.3, 1.5):
        check = SloCheck(
            metric="ttft_seconds", percentile=99, target_seconds=1.0, simulated_seconds=simulated, met=True
        )
        planner = ranges.check_slo(check, {}).verdict
        ours = D.verdict(ranges.ttft.interval(simulated), ranges.tpot.interval(0.0), (1.0, 1.0))
        assert ours == planner, simulated


def test_the_range_choice_is_the_planners_on_the_committed_ranges():
    committed = serving_errors()["ranges"]
    regimes = {r for entry in committed.values() for r in entry["regimes"]} | {"MoE, 1 GPU, AMD, sglang"}
    for kind in ("ttft", "tpot", "throughput"):
        for regime in regimes:
            assert D.pick_range(committed, kind, regime) == traffic_range(kind, regime), (kind, regime)


def test_pooled_shares_and_each_source_left_out():
    def decision(category, error, within):
        return {
            "category": category,
            "replica_error": error,
            "measured_within_likely": within,
            "likely_share_of_decisions": 0.5,
            "measured_replicas_within_likely": within,
            "chance_exact": 0.25,
            "chance_within_one": 0.5,
        }

    decisions = [decision("exact", 0.0, True), decision("further", -0.6, False), decision("one step off", 0.2, True)]
    sources = ["a", "a", "b"]
    p = D.pooled(decisions)
    assert (p["exact"], p["one_step_off"], p["further"]) == (1, 1, 1)
    assert p["share_exact"] == pytest.approx(1 / 3) and p["share_within_one_step"] == pytest.approx(2 / 3)
    assert p["median_abs_replica_error"] == pytest.approx(0.2) and p["median_signed_replica_error"] == 0.0
    loso = D.left_out(decisions, sources)
    # without a: b's one decision (one step off); without b: a's two (exact, further)
    assert loso["share_exact"]["by_source"] == {"a": 0.0, "b": 0.5}
    assert (loso["share_exact"]["min"], loso["share_exact"]["max"]) == (0.0, 0.5)
    assert loso["median_abs_replica_error"]["by_source"] == {"a": pytest.approx(0.2), "b": pytest.approx(0.3)}


@pytest.fixture(scope="module")
def accuracy():
    spec = importlib.util.spec_from_file_location("accuracy", ROOT / "benchmarks" / "accuracy.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["accuracy"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_committed_summary_and_report_carry_the_decisions_the_engine_makes(accuracy):
    committed = json.loads((ROOT / "planner" / "accuracy.json").read_text())["serving"]["decisions"]
    cases, unmapped = accuracy.serving_cases()
    results = [r for r in accuracy.evaluate(cases) if math.isfinite(r.error)]
    fresh = D.summary(
        results, accuracy.traffic_ranges, accuracy._read(accuracy.SERVING_FILE), unmapped, accuracy.serving_source
    )
    fresh = json.loads(json.dumps(accuracy._finite_or_none(fresh)))
    assert _same(fresh, committed)
    assert committed["sweeps"] and committed["pooled"]["decisions"] == len(D.RULES) * len(committed["sweeps"])
    # every replayed source with a sweep is checked; the sweeps that cannot be replayed are named with a reason
    assert {s["source"] for s in committed["sweeps"]} == set(committed["sources"])
    assert all(item["reason"] for item in committed["not_checked"])
    report = (ROOT / "benchmarks" / "accuracy" / "report.md").read_text()
    assert "\n".join(D.report_lines(committed)) in report


def _same(a, b) -> bool:
    """Equal up to float rounding (1e-9 relative), recursively."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), (a, b)
        return all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), (a, b)
        return all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        assert a == pytest.approx(b, rel=1e-9), (a, b)
        return True
    assert a == b
    return True
