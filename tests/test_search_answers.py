"""Engine answers the pages and `diagnose` share: sweeps (planner.search.explore), the nearest plans that fit
(planner.search.nearest), roofline points (planner.search.roofline_points) and warning codes."""

from __future__ import annotations

import json

import pytest

from planner import InferenceScenario, plan
from planner.cli.main import main
from planner.results import coded_warnings, warning_of
from planner.search import explore
from planner.search.nearest import micro_batch_what_if, nearest_fitting
from planner.search.roofline_points import attainable, plan_roofline, ridge, roof
from planner.training.scenario import TrainingScenario

CROWDED = InferenceScenario(concurrency=512)  # Llama-3.1-70B on 4 x H100: 136 GiB per GPU, does not fit


# --------------------------------------------------------------------------------------- sweeps


def test_concurrency_axis_reaches_past_the_request_and_the_most_that_fits():
    # reach = max(256, 2 x 512, 2 x 183) = 1024: powers of two up to it, plus 512 (asked) and 183 (fits).
    assert explore.concurrency_axis(CROWDED, 183) == [1, 2, 4, 8, 16, 32, 64, 128, 183, 256, 512, 1024]
    # A tiny request still sweeps to 256; the cap is 2^15.
    assert explore.concurrency_axis(InferenceScenario(concurrency=3), None)[-2:] == [128, 256]
    assert explore.concurrency_axis(InferenceScenario(concurrency=3), 10**6)[-1] == explore.MAX_SWEEP_CONCURRENCY


def test_context_axis_is_powers_of_two_from_512_past_the_output_plus_the_current_context():
    # 2,048 prompt + 512 output = 2,560; 512 itself is not longer than the output, so it is left out.
    axis = explore.context_axis(CROWDED, 131_072)
    assert axis == [1024, 2048, 2560, 4096, 8192, 16384, 32768, 65536, 131072]


def test_each_sweep_point_is_the_full_plan_of_its_variant():
    sweep = explore.concurrency_sweep(CROWDED, concurrencies=[64, 512])
    assert [p.concurrency for p in sweep.points] == [64, 512]
    for point in sweep.points:
        expected = plan(InferenceScenario(concurrency=point.concurrency))
        assert point.output_tokens_per_second == expected.performance.output_tokens_per_second
        assert point.tpot_seconds == expected.performance.tpot_seconds
        assert point.total_bytes == expected.memory.total_bytes
        assert point.fits == expected.memory.fits
    assert [p.fits for p in sweep.points] == [True, False]


def test_the_grid_keeps_the_output_and_gives_the_prompt_the_rest():
    grid = explore.context_concurrency_grid(CROWDED, concurrencies=[1, 64], contexts=[512, 4096])
    # 512 tokens of context leave no prompt beside 512 output tokens: that row is left out.
    assert [(p.context_tokens, p.concurrency) for p in grid.points] == [(4096, 1), (4096, 64)]
    expected = plan(InferenceScenario(concurrency=64, prompt_tokens=4096 - 512))
    assert grid.points[1].ttft_seconds == expected.performance.ttft_seconds


def test_default_axes_come_from_the_scenarios_own_plan():
    base = plan(CROWDED)
    sweep = explore.concurrency_sweep(CROWDED)
    assert sweep.concurrencies == explore.concurrency_axis(CROWDED, base.memory.max_concurrency)
    assert base.memory.max_concurrency in sweep.concurrencies


# ------------------------------------------------------------------------------------- roofline


def test_roof_spans_whole_decades_around_the_points_and_the_ridge():
    # peak 1000 FLOP/s, 10 B/s: ridge 100 FLOP/B. Points at 1 FLOP/B: 1/4 -> 0.1, 100 x 4 -> 1000.
    r = roof(1000.0, 10.0, [1.0])
    assert ridge(1000.0, 10.0) == r.ridge_flops_per_byte == 100.0
    assert r.intensities_flops_per_byte[0] == pytest.approx(0.1)
    assert r.intensities_flops_per_byte[-1] == pytest.approx(1000.0)
    assert 100.0 in r.intensities_flops_per_byte
    roof_at = dict(zip(r.intensities_flops_per_byte, r.attainable_flops_per_second))
    assert roof_at[100.0] == 1000.0  # the ridge: both roofs meet
    assert r.attainable_flops_per_second[0] == pytest.approx(1.0)  # 10 B/s x 0.1 FLOP/B
    # Without whole decades and a margin of 2: 1 / 2 = 0.5 up to 100 x 2 = 200.
    tight = roof(1000.0, 10.0, [1.0], margin=2.0, whole_decades=False)
    assert tight.intensities_flops_per_byte[0] == pytest.approx(0.5)
    assert tight.intensities_flops_per_byte[-1] == pytest.approx(200.0)


def test_plan_phases_sit_at_their_achieved_rate_under_the_roof():
    p = plan(CROWDED)
    line = plan_roofline(p)
    assert [x.phase for x in line.phases] == ["prefill", "decode"]
    decode = line.phases[1]
    d, hw = p.performance.decode, p.hardware
    assert decode.arithmetic_intensity_flops_per_byte == d.flops / d.bytes
    assert decode.achieved_flops_per_second == d.flops / d.seconds
    assert decode.roof_flops_per_second == min(
        hw.peak_flops_per_second, hw.memory_bandwidth_bytes_per_second * (d.flops / d.bytes)
    )
    assert 0 < decode.fraction_of_roof < 1
    assert decode.binding == "memory_bandwidth"
    assert float(attainable(hw.peak_flops_per_second, hw.memory_bandwidth_bytes_per_second, 1e9)) == (
        hw.peak_flops_per_second
    )


# -------------------------------------------------------------------------------------- nearest


def test_nearest_plans_that_fit_are_cheap_techniques_then_the_simpler_alternatives():
    found = nearest_fitting(CROWDED)
    assert len(found) <= 4
    kinds = [n.kind for n in found]
    assert kinds[-2:] == ["smaller_model", "longest_context"]
    assert set(kinds[:-2]) == {"technique"}
    for n in found:
        assert plan(InferenceScenario.model_validate(n.scenario)).memory.fits, n.label
    assert found[-1].label == "912-token context"  # the engine's max context at 512 sequences


def test_a_training_plan_that_does_not_fit_offers_its_largest_fitting_micro_batch_first():
    scenario = TrainingScenario(micro_batch_size=8, sequence_length=4096)
    base = plan(scenario)
    assert not base.memory.fits
    what_if = micro_batch_what_if(scenario, base)
    # Only micro-batch 1 fits; the global batch of 64 over DP 8 then takes 8 accumulation steps.
    assert what_if.label == "micro-batch 1"
    assert what_if.summary.startswith("Gradient accumulation: 8 steps of 1")
    changed = TrainingScenario.model_validate(what_if.scenario)
    assert changed.micro_batch_size == 1 and changed.global_batch_size == scenario.global_batch_size
    assert plan(changed).memory.fits
    assert nearest_fitting(scenario)[0] == what_if
    assert micro_batch_what_if(CROWDED, plan(CROWDED)) is None


# ------------------------------------------------------------------------------------- warnings


def test_warnings_carry_codes_in_the_same_order_and_the_json_keeps_its_sentences():
    p = plan(CROWDED)
    assert p.warning_codes == ["does_not_fit", "kv_exceeds_weights"]
    assert [w.message for w in coded_warnings(p)] == p.warnings
    assert warning_of(p, "kv_exceeds_weights").message.startswith("KV cache (100 GiB) is larger than the weights")
    assert warning_of(p, "low_headroom") is None
    data = json.loads(p.model_dump_json())
    assert all(isinstance(w, str) for w in data["warnings"]) and data["warning_codes"] == p.warning_codes


def test_training_warnings_have_codes_too():
    p = plan(TrainingScenario(micro_batch_size=8, sequence_length=4096))
    assert p.warning_codes[0] == "does_not_fit" and p.warnings[0].startswith("Does not fit")
    assert len(p.warning_codes) == len(p.warnings)


def test_a_stream_that_cannot_be_served_is_warned_by_code():
    from planner.inference.workload import Traffic

    p = plan(InferenceScenario(concurrency=4, prompt_tokens=60_000, num_gpus=1, tensor_parallel=1, traffic=Traffic()))
    assert p.traffic is None
    assert warning_of(p, "traffic_not_simulated") is not None


# -------------------------------------------------------------------------------------- the CLI


def test_diagnose_prints_the_sweeps_roofline_and_nearest_plans(tmp_path, capsys):
    path = tmp_path / "s.json"
    path.write_text(CROWDED.model_dump_json())
    assert main(["diagnose", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [n["label"] for n in out["nearest"]] == [n.label for n in nearest_fitting(CROWDED)]
    assert [p["phase"] for p in out["roofline"]["phases"]] == ["prefill", "decode"]
    assert out["roofline"]["roof"]["ridge_flops_per_byte"] == pytest.approx(989.4e12 / 3.35e12)
    sweep = explore.concurrency_sweep(CROWDED)
    assert out["concurrency_sweep"] == json.loads(sweep.model_dump_json())
    assert len(out["context_grid"]["points"]) == 9 * 12  # 9 contexts x 12 concurrencies, all valid
    assert main(["diagnose", str(path), "--format", "text"]) == 0
    text = capsys.readouterr().out
    assert "Suggestions that fix the plan:\n  Ranked by $ per 1M output tokens" in text
    # vLLM caches K/V in fp8, not int4 (planner.dtypes.kv_format_served): the mildest fitting pair that it runs
    assert "  1. [precision] weights bf16 → fp8 + KV bf16 → fp8\n" in text
    assert "[precision] KV bf16 → int4" not in text and "[fewer_users] 183 users instead of 512" in text
    assert "Roofline (one step per GPU; peak 989 TFLOP/s, HBM 3.35 TB/s, ridge 295 FLOP/B):" in text
    assert "\n183          yes   2.12k" in text  # the most that fits, in the concurrency sweep
    assert "Output tokens/s by context (prompt + output) and concurrency" in text


def test_diagnose_of_a_plan_that_fits_has_no_nearest_and_training_no_sweeps(tmp_path, capsys):
    path = tmp_path / "t.json"
    path.write_text(TrainingScenario().model_dump_json())
    assert main(["diagnose", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["roofline"] is None and out["concurrency_sweep"] is None and out["context_grid"] is None
    assert main(["diagnose", str(path), "--format", "text"]) == 0
    assert "Concurrency sweep" not in capsys.readouterr().out
