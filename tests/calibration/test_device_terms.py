"""The calibration's device terms (issue 13): the link's per-step latency alpha fitted to the all-reduce sizes and
the GEMM ceiling and fixed time per kernel t0 fitted to the timed square matmuls, recovered from synthetic
timings with known values, carried into plans on the GPU the record measured (and only there), and absent on
older records, which load and plan as before. No torch."""

from __future__ import annotations

import json

import pytest

from planner import plan
from planner.calibration.comparison import comparison_rows
from planner.calibration.fit import fit_efficiency
from planner.calibration.predict import GemmShape, predicted_seconds
from planner.calibration.reference import Reference, device_reference, fit_allreduce, fit_gemm_shape
from planner.calibration.report import device_terms, efficiency_lines
from planner.calibration.store import export_calibration, parse_calibration
from planner.calibration_record import AllReduceMeasurement, CalibrationRecord, Ceilings, MatmulMeasurement
from planner.hardware.catalog import get_accelerator
from planner.inference.scenario import InferenceScenario
from planner.physics import collectives
from planner.physics.gemm_efficiency import (
    REFERENCE_CEILING,
    TRAINING_GEMMS_PER_FORWARD_GEMM,
    TRAINING_REFERENCE_CEILING,
)
from planner.scenario import parse_scenario
from planner.share import calibration_fingerprint, decode_calibration, encode_calibration
from planner.training.inputs import training_hardware

from .synthetic import DTYPE, GPU, TRUE, fitted_record, measurements, partially_overlapping_seconds, synthetic_record

PEAK = 989.4e12  # h100-sxm dense BF16, FLOP/s (catalog)
CEILING, T0 = 0.70, 8e-6  # the imaginary H100's GEMM curve (the table says 80.3 % and 6.6 us)
ALPHA, BETA = 10e-6, 0.65  # its NVLink: per-step latency and bandwidth efficiency (catalog alpha 3 us)


def _matmul(n: int, seconds: float) -> MatmulMeasurement:
    return MatmulMeasurement(dtype=DTYPE, shape="square", m=n, n=n, k=n, seconds=seconds, reps=5)


def _curve(n: int) -> float:
    return 2.0 * n**3 / (CEILING * PEAK) + T0


def test_the_gemm_curve_is_recovered_from_square_matmuls():
    # 2048^3: 2 x 2048^3 / (0.70 x 989.4e12) + 8 us = 24.806 + 8 = 32.806 us
    # 8192^3: 2 x 8192^3 / (0.70 x 989.4e12) + 8 us = 1587.6 + 8 = 1595.6 us
    # slope (1595.6 - 32.806) us / (1.0995e12 - 1.718e10) FLOP = 1 / (0.70 x 989.4e12); t0 = 32.806 - 24.806 us.
    assert _curve(2048) == pytest.approx(32.806e-6, rel=1e-4)
    assert _curve(8192) == pytest.approx(1595.6e-6, rel=1e-4)
    # Two sizes: the two equations solve exactly. More: least squares, exact on exact data.
    for sizes in ((2048, 8192), (2048, 4096, 8192, 16384)):
        fit = fit_gemm_shape([_matmul(n, _curve(n)) for n in sizes], DTYPE, PEAK)
        assert fit is not None and fit.sizes == list(sizes)
        assert fit.ceiling == pytest.approx(CEILING, rel=1e-9)
        assert fit.tail_seconds == pytest.approx(T0, rel=1e-6)
    # The fastest timing per size counts; skinny, other dtypes and launch-bound sizes (below 2048) are left out;
    # one size fits nothing.
    launch_bound = [_matmul(256, 10e-6), _matmul(1024, 20e-6)]
    noisy = [*launch_bound, _matmul(2048, _curve(2048)), _matmul(2048, 2 * _curve(2048)), _matmul(8192, _curve(8192))]
    skinny = MatmulMeasurement(dtype=DTYPE, shape="skinny", m=16, n=8192, k=8192, seconds=1e-3, reps=5)
    fp32 = MatmulMeasurement(dtype="fp32", shape="square", m=512, n=512, k=512, seconds=1.0, reps=5)
    assert fit_gemm_shape([*noisy, skinny, fp32], DTYPE, PEAK).ceiling == pytest.approx(CEILING, rel=1e-9)
    assert fit_gemm_shape([_matmul(8192, _curve(8192)), skinny], DTYPE, PEAK) is None


def test_a_device_whose_small_gemms_cost_nothing_extra_gets_t0_zero():
    # 2048^3 at 0.5 ms and 4096^3 (8x the work) at 4.2 ms (the larger one slower per FLOP): the line through
    # them crosses zero below it (0.5 - 3.7 / 7 = -0.0286 ms), so t0 = 0 and the ceiling is refitted alone
    # (on a 100 TFLOP/s peak: 17.2 GFLOP / 0.5 ms = 34.4 %, 137 GFLOP / 4.2 ms = 32.7 %).
    fit = fit_gemm_shape([_matmul(2048, 0.5e-3), _matmul(4096, 4.2e-3)], DTYPE, 100e12)
    assert fit is not None and fit.tail_seconds == 0.0
    assert 2.0 * 2048**3 / (fit.ceiling * 100e12) == pytest.approx(0.5e-3, rel=0.1)


def test_alpha_and_beta_are_recovered_from_the_allreduce_sizes():
    ref = Reference.from_catalog(GPU)
    link = ref.link_bytes_per_second  # 450 GB/s NVLink 4
    timings = [
        AllReduceMeasurement(
            backend="nccl",
            world_size=2,
            message_bytes=m,
            seconds=float(collectives.allreduce_seconds(m, 2, link, ALPHA, BETA)),
            reps=5,
        )
        for m in (64 << 10, 16 << 20, 256 << 20)
    ]
    # 256 MiB over 2 ranks by ring: base + 2 x 10 us + 268.4 MB / (450 GB/s x 0.65) = 0.9178 ms + 20 us + base
    assert timings[-1].seconds == pytest.approx(
        collectives.RING_BASE_SECONDS + 2 * ALPHA + (256 << 20) / (link * BETA), rel=1e-9
    )
    fit = fit_allreduce(timings, ref, 0.5)
    assert fit.latency_fitted and fit.latency_seconds == pytest.approx(ALPHA, rel=1e-6)
    assert fit.efficiency == pytest.approx(BETA, rel=1e-9)
    assert not fit_allreduce(timings[-1:], ref, 0.5).latency_fitted  # one size: the catalog's alpha stays


def _curve_device(phase, flops, bytes_moved, peak, bandwidth, efficiency, layers=0):
    """A roofline H100 whose GEMMs follow this device's curve (0.70, 8 us) instead of the published one."""
    ratio = CEILING / (TRAINING_REFERENCE_CEILING if phase == "train" else REFERENCE_CEILING)
    passes = TRAINING_GEMMS_PER_FORWARD_GEMM if phase == "train" else 1  # forward + 2 backward GEMM passes
    return predicted_seconds(
        phase, flops, bytes_moved, peak, bandwidth, efficiency, GemmShape(ratio, T0, passes), layers
    )


def _with_curve(ceilings: Ceilings, sizes=(1024, 2048, 4096, 8192)) -> Ceilings:
    """The synthetic ceilings with their square matmuls timed on this device's curve instead."""
    skinny = [m for m in ceilings.matmul if m.shape == "skinny"]
    return ceilings.model_copy(update={"matmul": [*skinny, *(_matmul(n, _curve(n)) for n in sizes)]})


def test_a_device_fitted_through_its_own_curve_round_trips():
    ref, g, ceilings, phases = measurements(device_seconds=_curve_device)
    ceilings = _with_curve(ceilings)
    device = device_reference(ref, ceilings)
    (gemm,) = device.gemm_shapes
    assert (gemm.ceiling, gemm.tail_seconds) == (pytest.approx(CEILING), pytest.approx(T0))
    fit = fit_efficiency(ceilings, phases, device, DTYPE, g, "curve")
    assert fit.efficiency.prefill_compute == pytest.approx(TRUE.prefill_compute, rel=1e-6)
    assert fit.efficiency.training_compute == pytest.approx(TRUE.training_compute, rel=1e-6)
    assert "70.0%" in fit.notes["gemm_shape_bf16"] and "80.3%" in fit.notes["gemm_shape_bf16"]
    rows = comparison_rows(ceilings, phases, device, DTYPE, g, fit.efficiency)
    matmul_rows = [r for r in rows if r.quantity.endswith("time") and r.phase == "matmul"]
    assert len(matmul_rows) == 3
    # (1e-5: the overhead's fixed point stops after 12 rounds, ~1e-6 from its limit with this larger t0)
    for row in (r for r in rows if r.role in ("fit", "holdout")):
        assert row.calibrated_error_fraction == pytest.approx(0.0, abs=1e-5), row.quantity
    # The published curve mispredicts the smallest: 2 x 2048^3 / (0.8033 x 989.4e12) + 6.6 us = 28.22 us vs 32.81.
    small = next(r for r in matmul_rows if "2048x2048" in r.quantity)
    assert small.predicted == pytest.approx(2.0 * 2048**3 / (794.5 / 989.0 * PEAK) + 6.6e-6, rel=1e-9)
    assert small.predicted == pytest.approx(28.22e-6, rel=1e-3) and small.measured == pytest.approx(32.806e-6, rel=1e-4)


def test_held_out_shapes_stay_within_the_bound_when_the_curve_is_fitted():
    """The non-roofline device of test_fit, now with its measured GEMM curve fitted through: the held-out
    prefill, decode and AdamW points stay within 10 %, as with the published curve."""
    ref, g, ceilings, phases = measurements(device_seconds=partially_overlapping_seconds)
    ceilings = _with_curve(ceilings)
    device = device_reference(ref, ceilings)
    fit = fit_efficiency(ceilings, phases, device, DTYPE, g, "overlap")
    held_out = [r for r in comparison_rows(ceilings, phases, device, DTYPE, g, fit.efficiency) if r.role == "holdout"]
    assert len(held_out) >= 3
    for row in held_out:
        assert abs(row.calibrated_error_fraction) < 0.10, (row.quantity, row.calibrated_error_fraction)


TP2 = InferenceScenario(
    model="llama-3.1-8b", gpu="h100-sxm", num_gpus=2, tensor_parallel=2, concurrency=16, prompt_tokens=2048
)


def test_an_inference_plan_on_the_measured_gpu_uses_alpha_and_the_gemm_curve():
    old, new = plan(TP2, synthetic_record()), plan(TP2, fitted_record())
    # Decode: 16 sequences x 4096 x 2 B = 128 KiB per all-reduce, one-shot (one latency step) either way;
    # 32 layers x 2 all-reduces x (10 - 3) us = 448 us more.
    delta = new.performance.decode.communication_seconds - old.performance.decode.communication_seconds
    assert delta == pytest.approx(32 * 2 * 7e-6, rel=1e-9)
    # Prefill: 2048 tokens x 4096 x 2 B = 16 MiB per all-reduce, two latency steps: 32 x 2 x 2 x 7 us = 896 us.
    delta = new.performance.prefill.communication_seconds - old.performance.prefill.communication_seconds
    assert delta == pytest.approx(32 * 2 * 2 * 7e-6, rel=1e-9)
    # Prefill compute: F / (peak x min(e x ratio, 1)) + 32 layers x 4 GEMMs x t0, ratio = 0.70 / 0.8033 (fitted)
    # instead of 1 (the table's H100 ceiling is the reference), t0 = 8 us instead of 6.6 us.
    e, flops = synthetic_record().efficiency.prefill_compute, old.performance.prefill.flops
    assert old.performance.prefill.compute_seconds == pytest.approx(flops / (PEAK * e) + 128 * 6.6e-6, rel=1e-9)
    assert new.performance.prefill.compute_seconds == pytest.approx(
        flops / (PEAK * e * CEILING / REFERENCE_CEILING) + 128 * T0, rel=1e-9
    )
    # 14.84 TFLOP per GPU at 0.55 x 989.4e12: 27.28 ms + 0.84 ms = 28.12 ms -> 31.31 ms + 1.02 ms = 32.33 ms
    assert (old.performance.prefill.compute_seconds, new.performance.prefill.compute_seconds) == (
        pytest.approx(28.12e-3, rel=1e-3),
        pytest.approx(32.33e-3, rel=1e-3),
    )


def test_a_training_plan_on_the_measured_gpu_uses_them_too():
    scenario = parse_scenario(
        {"kind": "training", "model": "llama-3.1-8b", "gpu": "h100-sxm", "num_gpus": 8, "tensor_parallel": 2}
    )
    accel = get_accelerator("h100-sxm")
    hw = training_hardware(scenario, accel, fitted_record())
    assert hw.intra_node_latency_seconds == ALPHA
    assert hw.gemm_ceiling_ratio == pytest.approx(CEILING / TRAINING_REFERENCE_CEILING)  # 0.70 / 0.8692 = 0.805
    assert hw.gemm_tail_seconds == T0
    default = training_hardware(scenario, accel, synthetic_record())
    assert default == training_hardware(scenario, accel)  # a record without the terms changes nothing here
    assert (
        plan(scenario, fitted_record()).performance.step_seconds
        > plan(scenario, synthetic_record()).performance.step_seconds
    )


def test_the_terms_never_travel_to_another_gpu_or_from_a_cpu():
    record = fitted_record()
    h200 = TP2.model_validate({**TP2.model_dump(), "gpu": "h200"})
    mapped = plan(h200, record, calibration_any_gpu=True)
    unfitted = plan(h200, synthetic_record(), calibration_any_gpu=True)
    assert mapped.performance.decode_step_seconds == unfitted.performance.decode_step_seconds
    # The same terms on a record that measured a CPU (even referred to the H100) never reach a plan.
    data = json.loads(record.model_dump_json())
    data["device"] = {**data["device"], "kind": "cpu"}
    cpu = CalibrationRecord.from_json_data(data)
    assert not cpu.device_terms_apply("h100-sxm") and record.device_terms_apply("h100-sxm")
    assert cpu.link_latency_for("h100-sxm") is None and cpu.gemm_shape_for("h100-sxm", "bf16") is None
    assert record.gemm_shape_for("h100-sxm", "fp8") is None  # a dtype it did not time keeps the table


def test_an_old_record_without_the_terms_loads_and_plans_as_before():
    old = synthetic_record()
    text = export_calibration(old)
    assert "link_latency_seconds" not in text and "gemm_shapes" not in text  # written as before the terms existed
    loaded = parse_calibration(text, "old.json")
    assert loaded.link_latency_seconds is None and loaded.gemm_shapes == []
    assert plan(TP2, loaded) == plan(TP2, old)
    # Its link value and fingerprint are what they were; a record with the terms round-trips through a link.
    link = decode_calibration(encode_calibration(old))
    assert link.record == old and link.fingerprint == calibration_fingerprint(old)
    fitted = fitted_record()
    assert decode_calibration(encode_calibration(fitted)).record == fitted
    assert calibration_fingerprint(fitted) != calibration_fingerprint(old)


def test_the_report_lists_the_fitted_terms_beside_the_published_ones():
    terms = {t.name: t for t in device_terms(fitted_record())}
    assert terms["link_latency_seconds (alpha)"].fitted == ALPHA
    assert terms["link_latency_seconds (alpha)"].published == pytest.approx(3e-6)
    assert terms["gemm_ceiling bf16 (MAMF / peak)"].published == pytest.approx(794.5 / 989.0)
    assert terms["gemm_tail_seconds bf16 (t0)"].fitted == T0
    assert device_terms(synthetic_record()) == []
    assert any(line.startswith("gemm_ceiling bf16") for line in efficiency_lines(fitted_record()))
