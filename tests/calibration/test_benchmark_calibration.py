"""Calibration from benchmark results: a factor the results were made with is fitted back, held-out runs show their
honest error (and say when the calibration makes them worse), the record is the torch profile's kind (it stores,
loads, travels in a link, and old records still serialize as before), plan() applies it only to the stack it
measured, and the CLI runs end to end."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from planner import plan
from planner.calibration import store
from planner.calibration.benchmark_record import stand_in
from planner.calibration.benchmark_replay import BenchmarkMismatch, check_run, held_out_indices, model_matches, replay
from planner.calibration.benchmark_run import BenchmarkRun
from planner.calibration.from_benchmark import calibrate_from_benchmark
from planner.cli.main import main
from planner.errors import PlanningError
from planner.inference.scenario import InferenceScenario
from planner.inference.traffic import TrafficEngine
from planner.physics.efficiency import DEFAULT_EFFICIENCY, Efficiency
from planner.scenario_base import revised
from planner.search.sweep import calibration_per_row
from planner.share import decode_calibration, encode_calibration
from ui.calibration_view import banner_lines

DEPLOYMENT = InferenceScenario(
    model="llama-3.1-8b", gpu="h100-sxm", num_gpus=1, tensor_parallel=1, concurrency=256, prompt_tokens=1024
)
CONCURRENCIES = (1, 4, 16, 64)


def _synthetic_run(concurrency: int, efficiency: Efficiency, model: str | None = None) -> BenchmarkRun:
    """What a vLLM run at this concurrency would report if the stack had `efficiency`: the simulator's own answer."""
    skeleton = BenchmarkRun(
        source=f"c{concurrency}.json",
        client="vllm",
        model=model,
        prompt_tokens_mean=1024,
        output_tokens_mean=256,
        max_concurrency=concurrency,
        num_prompts=max(4 * concurrency, 16),
        output_tokens_per_second=1.0,
    )
    scenario, traffic = replay(DEPLOYMENT, skeleton)
    result = TrafficEngine.of(scenario, stand_in(DEPLOYMENT, efficiency), traffic).simulate()
    return revised(
        skeleton,
        ttft={"mean_seconds": result.ttft_seconds.mean},
        tpot={"mean_seconds": result.tpot_seconds.mean},
        output_tokens_per_second=result.output_tokens_per_second,
    )


@pytest.fixture(scope="module")
def slow_memory_runs():
    truth = Efficiency(memory_bandwidth=0.6)  # the documented default is 0.80
    return [_synthetic_run(c, truth, "meta-llama/Llama-3.1-8B-Instruct") for c in CONCURRENCIES]


@pytest.fixture(scope="module")
def record(slow_memory_runs):
    return calibrate_from_benchmark(DEPLOYMENT, slow_memory_runs)


def test_a_known_bandwidth_is_fitted_back(record):
    factors = {f.name: f for f in record.benchmark.factors}
    assert set(factors) == {"dense_gemm", "memory_bandwidth", "step_host", "request_overhead"}  # dense: no MoE
    assert record.efficiency.memory_bandwidth == pytest.approx(0.6, rel=0.03)
    assert factors["memory_bandwidth"].separated and factors["memory_bandwidth"].prior_values == {
        "memory_bandwidth": 0.8
    }
    # the GEMMs were left at their value and stay there (within the prior's pull)
    assert record.efficiency.prefill_compute == pytest.approx(DEFAULT_EFFICIENCY.prefill_compute, rel=0.03)
    assert record.source == "benchmark" and record.reference_gpu == "h100-sxm"
    assert record.benchmark.fit_seconds < 30


def test_held_out_points_show_their_error_before_and_after(record):
    roles = {p.key: p.role for p in record.benchmark.points}
    assert roles == {"p1": "fit", "p2": "holdout", "p3": "holdout", "p4": "fit"}  # the middle of the sweep
    held = [r for r in record.predicted_vs_measured if r.role == "holdout"]
    assert {r.phase for r in held} == {"p2", "p3"} and len(held) == 6  # TTFT, TPOT, throughput each
    tpot = [r for r in held if r.quantity == "mean TPOT"]
    assert all(r.error_fraction < -0.1 for r in tpot)  # the defaults' bandwidth is too fast
    assert all(abs(r.calibrated_error_fraction) < 0.03 for r in held)
    assert record.residual_error is not None and record.residual_error < 0.03


def test_a_held_out_point_made_worse_is_named_in_the_notes():
    fitted = [_synthetic_run(c, Efficiency(memory_bandwidth=0.6)) for c in (1, 64)]
    as_documented = _synthetic_run(8, DEFAULT_EFFICIENCY)  # the defaults predict this one exactly
    record = calibrate_from_benchmark(DEPLOYMENT, [fitted[0], as_documented, fitted[1]])
    worse = [n for n in record.notes if "makes held-out point p2" in n]
    assert worse and "worse on TPOT" in " ".join(worse)


def test_hold_out_choices():
    runs = [_fake(c) for c in (64, 1, 16, 4, 8)]
    assert held_out_indices(runs, "middle") == [2, 3, 4]  # all but c=1 (index 1) and c=64 (index 0)
    assert held_out_indices(runs[:2], "middle") == [] and held_out_indices(runs, "none") == []
    assert held_out_indices(runs, [4, 2]) == [2, 4]
    with pytest.raises(PlanningError, match="at least one must be fitted"):
        held_out_indices(runs, [0, 1, 2, 3, 4])
    with pytest.raises(PlanningError, match="not all among the 5 runs"):
        held_out_indices(runs, [7])


def _fake(concurrency: int, **changes) -> BenchmarkRun:
    fields = dict(
        source=f"c{concurrency}.json",
        client="vllm",
        prompt_tokens_mean=1024,
        output_tokens_mean=256,
        max_concurrency=concurrency,
        num_prompts=100,
        output_tokens_per_second=100.0,
    )
    return BenchmarkRun.model_validate(fields | changes)


def test_a_result_of_another_model_or_impossible_lengths_is_refused():
    assert model_matches(DEPLOYMENT, "meta-llama/Llama-3.1-8B-Instruct")
    assert not model_matches(DEPLOYMENT, "meta-llama/Llama-3.1-70B-Instruct")
    with pytest.raises(BenchmarkMismatch, match="c4.json: it benchmarked model 'Qwen/Qwen3-8B', but the deployment"):
        check_run(DEPLOYMENT, _fake(4, model="Qwen/Qwen3-8B"))
    check_run(DEPLOYMENT, _fake(4, model="Qwen/Qwen3-8B"), allow_other_model=True)
    with pytest.raises(BenchmarkMismatch, match="reach 200,256 tokens .* more than the deployment's model context"):
        check_run(DEPLOYMENT, _fake(4, prompt_tokens_mean=200_000))


def test_plan_applies_the_record_to_its_stack_only(record):
    calibrated = plan(DEPLOYMENT, calibration=record)
    default = plan(DEPLOYMENT)
    assert (
        calibrated.calibration == record.label
        and calibrated.performance.tpot_seconds > default.performance.tpot_seconds * 1.1
    )
    with pytest.raises(PlanningError, match="applies to plans for 'h100-sxm', not 'h200'"):
        plan(revised(DEPLOYMENT, gpu="h200"), calibration=record)
    with pytest.raises(PlanningError, match="another serving stack .*runtime 'sglang', not 'vllm'"):
        plan(revised(DEPLOYMENT, runtime="sglang"), calibration=record)
    with pytest.raises(PlanningError, match="model family 'qwen3', not 'llama'"):
        plan(revised(DEPLOYMENT, model="qwen3-8b"), calibration=record)
    mapped = plan(revised(DEPLOYMENT, runtime="sglang"), calibration=record, calibration_any_gpu=True)
    assert "fitted to benchmarks of another serving stack" in mapped.warnings[0]


def test_the_record_stores_loads_and_travels_in_a_link(record, tmp_path):
    path = store.write_calibration_file(record, tmp_path / "cal.json")
    loaded = store.load_calibration_file(path)
    assert loaded == record and loaded.benchmark.factors == record.benchmark.factors
    link = decode_calibration(encode_calibration(record))
    assert link.record == record
    assert len(encode_calibration(record)) < 5534  # shorter than a torch calibration's link


def test_a_profile_record_serializes_as_before(record):
    profile_like = revised(record, source="profile", benchmark=None)
    data = json.loads(store.export_calibration(profile_like))
    assert "source" not in data and "benchmark" not in data  # old records and their fingerprints are unchanged


def _vllm_file(path, run: BenchmarkRun) -> None:
    """A synthetic run written as `vllm bench serve --save-result` writes it (ms)."""
    data = {
        "backend": "openai",
        "model_id": "meta-llama/Llama-3.1-8B-Instruct",
        "num_prompts": run.num_prompts,
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": run.max_concurrency,
        "completed": run.num_prompts,
        "total_input_tokens": 1024 * run.num_prompts,
        "total_output_tokens": 256 * run.num_prompts,
        "output_throughput": run.output_tokens_per_second,
        "mean_ttft_ms": run.ttft.mean_seconds * 1e3,
        "mean_tpot_ms": run.tpot.mean_seconds * 1e3,
    }
    path.write_text(json.dumps(data))


def test_cli_from_benchmark_writes_a_record_that_plan_and_traffic_apply(slow_memory_runs, tmp_path, capsys):
    files = []
    for run in slow_memory_runs[:3]:
        files.append(tmp_path / run.source)
        _vllm_file(files[-1], run)
    scenario = tmp_path / "deployment.json"
    scenario.write_text(DEPLOYMENT.model_dump_json())
    out = tmp_path / "cal.json"
    argv = ["calibrate", "--from-benchmark", *map(str, files), "--scenario", str(scenario), "--out", str(out)]
    assert main([*argv, "--no-save", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "p2 c=4, 1024/256 tokens: mean TPOT" in printed and "held out" in printed
    assert store.load_calibration_file(out).efficiency.memory_bandwidth == pytest.approx(0.6, rel=0.05)
    assert main(["plan", str(scenario), "--calibration", str(out), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["calibration"] == store.load_calibration_file(out).label
    assert main(["traffic", str(scenario), "--calibration", str(out), "--requests", "20", "--rate", "2"]) == 0


def test_cli_bad_input_is_one_sentence_and_writes_nothing(tmp_path, capsys):
    scenario = tmp_path / "deployment.json"
    scenario.write_text(DEPLOYMENT.model_dump_json())
    bad = tmp_path / "result.json"
    bad.write_text('{"backend": "openai", "mean_ttft_ms": ')
    out = tmp_path / "cal.json"
    code = main(
        ["calibrate", "--from-benchmark", str(bad), "--scenario", str(scenario), "--out", str(out), "--no-save"]
    )
    err = capsys.readouterr().err
    assert code == 2 and "result.json ends part-way through its JSON (truncated?)" in err and "Traceback" not in err
    assert not out.exists()
    assert main(["calibrate", "--from-benchmark", str(bad)]) == 2
    assert "go together" in capsys.readouterr().err


def test_sweeps_price_another_serving_stack_with_the_defaults_as_plan_does(record):
    """A sweep (Trade-offs, search, SLO search) holds a benchmark calibration to its serving stack too: the rows of a
    base on another runtime or model family get the documented defaults, as plan() refuses the record there."""
    gpus = pd.Series(["h100-sxm", "h100-sxm"])
    own, _ = calibration_per_row(gpus, record, DEPLOYMENT)
    other, correction = calibration_per_row(gpus, record, revised(DEPLOYMENT, runtime="sglang"))
    default, _ = calibration_per_row(gpus, None, DEPLOYMENT)
    assert own != default and other == default and correction == 0.0
    mapped, _ = calibration_per_row(gpus, record.for_any_gpu(), revised(DEPLOYMENT, runtime="sglang"))
    assert mapped == own


def test_the_banner_names_a_stack_the_calibration_does_not_apply_to(record):
    lines = banner_lines(record, [DEPLOYMENT, revised(DEPLOYMENT, runtime="sglang"), "h200"], lambda s: s)
    assert "calibrated" in lines[1]
    assert "not applied" in lines[2] and "runtime 'sglang', not 'vllm'" in lines[2]
    assert "not applied" in lines[3] and "not 'h200'" in lines[3]
    mapped = banner_lines(record.for_any_gpu(), [revised(DEPLOYMENT, model="qwen3-8b")], lambda s: s)
    assert "mapped" in mapped[1] and "model family 'qwen3'" in mapped[1]
