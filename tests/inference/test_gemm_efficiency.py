"""GEMM efficiency by shape and GPU generation (planner.physics.gemm_efficiency) and how the inference steps use
it: worked numbers from the published figures the module cites."""

from __future__ import annotations

import numpy as np
import pytest

from planner.hardware.catalog import get_accelerator
from planner.inference.inputs import HardwareInputs
from planner.physics import gemm_efficiency as ge
from planner.physics.roofline import compute_seconds, shaped_compute_seconds


def test_ceilings_are_the_published_mamf_over_the_dense_peak():
    # Bekman, ml-engineering MAMF table: H100 SXM BF16 794.5 / 989, FP8 1402.6 / 1979; A100 SXM 271.2 / 312.
    assert ge.gemm_ceiling("h100-sxm", "bf16") == pytest.approx(0.80334, abs=1e-5)
    assert ge.gemm_ceiling("h100-sxm", "fp8") == pytest.approx(0.70874, abs=1e-5)
    assert ge.gemm_ceiling("h200", "fp8") == pytest.approx(0.73441, abs=1e-5)  # 1453.4 / 1979
    assert ge.gemm_ceiling("a100-80gb", "bf16") == pytest.approx(0.86923, abs=1e-5)
    # fp16 runs at the BF16 rate and int8 at the FP8 one; a format without a figure falls back to BF16
    # (B300 fp4 -> 1769 / 2250); B200 NVFP4 has its own: 6624 / 9000.
    assert ge.gemm_ceiling("a100-80gb", "fp16") == ge.gemm_ceiling("a100-80gb", "bf16")
    assert ge.gemm_ceiling("h100-sxm", "int8") == ge.gemm_ceiling("h100-sxm", "fp8")
    assert ge.gemm_ceiling("b300", "fp4") == pytest.approx(0.78622, abs=1e-5)
    assert ge.gemm_ceiling("b200", "fp4") == pytest.approx(0.73600, abs=1e-5)
    # A device without a published MAMF keeps the reference, so its plan does not move.
    assert ge.gemm_ceiling("l40s", "fp8") == ge.REFERENCE_CEILING
    assert ge.ceiling_ratio("l40s", "bf16") == 1.0


def test_ratios_against_the_reference():
    # A100: 0.869231 / 0.803337 = 1.08203 (its GEMMs get closer to peak than H100's)
    assert ge.ceiling_ratio("a100-80gb", "bf16") == pytest.approx(1.08203, abs=1e-5)
    # H100 FP8: 0.708742 / 0.803337 = 0.88225
    assert ge.ceiling_ratio("h100-sxm", "fp8") == pytest.approx(0.88225, abs=1e-5)
    assert ge.ceiling_ratio("h100-sxm", "bf16") == pytest.approx(1.0)


def test_the_tail_reproduces_the_cublas_points_it_came_from():
    """B200 cuBLAS (pyptx.dev): saturated 1652 TFLOP/s; 2048^3 at 1006, 4096^3 at 1532."""
    ceiling, peak = 1652.0 / 2250.0, 2250e12
    # 2048^3: W = 2 x 2048^3 = 1.71799e10; t0 x R = 6.6e-6 x 1652e12 = 1.09032e10
    # fraction = 0.734222 x 1.71799 / (1.71799 + 1.09032) = 0.734222 x 0.611752 = 0.449162 -> 1010.6 TFLOP/s
    small = ge.gemm_fraction(2048, 2048, 2048, ceiling, peak)
    assert small == pytest.approx(0.449162, rel=1e-5)
    assert small * 2250 == pytest.approx(1006, rel=0.01)
    # 4096^3: W = 1.37439e11 -> 0.734222 x 1.37439 / (1.37439 + 0.109032) = 0.680258 -> 1530.6 TFLOP/s
    large = ge.gemm_fraction(4096, 4096, 4096, ceiling, peak)
    assert large == pytest.approx(0.680258, rel=1e-5)
    assert large * 2250 == pytest.approx(1532, rel=0.01)
    # Large GEMMs tend to the ceiling; a decode GEMV (M = 1) reaches almost nothing of the peak.
    assert ge.gemm_fraction(16384, 16384, 16384, ceiling, peak) == pytest.approx(ceiling, rel=0.002)
    assert ge.gemm_fraction(1, 4096, 4096, ceiling, peak) < 0.01


def test_fraction_broadcasts_over_arrays_and_grows_with_m():
    m = np.array([1, 16, 128, 1024, 8192])
    fractions = ge.gemm_fraction(m, 4096, 4096, ge.gemm_ceiling("h100-sxm", "bf16"), 989.4e12)
    assert fractions.shape == (5,)
    assert np.all(np.diff(fractions) > 0)
    assert fractions[-1] < ge.gemm_ceiling("h100-sxm", "bf16")
    # no tail (a CPU): the ceiling whatever the shape
    flat = ge.gemm_fraction(m, 64, 64, 0.5, 1e12, tail_seconds=ge.gemm_tail_seconds(False))
    assert np.all(flat == 0.5)


def test_shaped_compute_seconds_worked():
    # 1 TFLOP on a 1 PFLOP/s peak at 0.6 x 1.08203 = 0.649218: 1e12 / (1e15 x 0.649218) = 1.540315e-3 s,
    # plus 32 layers x 4 GEMM kernels x 6.6 us = 8.448e-4 s -> 2.385115e-3 s
    seconds = shaped_compute_seconds(
        1e12, 1e15, 0.6, ge.ceiling_ratio("a100-80gb", "bf16"), 32 * 4, ge.GEMM_TAIL_SECONDS
    )
    assert seconds == pytest.approx(2.385115e-3, rel=1e-5)
    # ratio 1 and no tail: the plain roofline term
    assert shaped_compute_seconds(1e12, 1e15, 0.6, 1.0, 128, 0.0) == compute_seconds(1e12, 1e15, 0.6)
    # the efficiency never exceeds 1: 0.95 x 1.082 is capped
    assert shaped_compute_seconds(1e12, 1e15, 0.95, 1.082, 0, 0.0) == pytest.approx(1e-3)
    # broadcasts (a sweep over ratios)
    ratios = np.array([1.0, 0.5])
    assert shaped_compute_seconds(1e12, 1e15, 0.5, ratios, 0, 0.0) == pytest.approx([2e-3, 4e-3])


def test_hardware_inputs_carry_the_generation():
    h100 = HardwareInputs.from_accelerator(get_accelerator("h100-sxm"), "fp8", 3.0)
    assert h100.gemm_ceiling_ratio == pytest.approx(0.88225, abs=1e-5)
    assert h100.gemm_tail_seconds == ge.GEMM_TAIL_SECONDS
    a100 = HardwareInputs.from_accelerator(get_accelerator("a100-80gb"), "fp8", 2.0)  # no FP8: BF16 kernels
    assert a100.gemm_ceiling_ratio == pytest.approx(1.08203, abs=1e-5)
    cpu = HardwareInputs.from_accelerator(get_accelerator("cpu"), "bf16", 0.0)
    assert (cpu.gemm_ceiling_ratio, cpu.gemm_tail_seconds) == (1.0, 0.0)


def test_training_is_stated_for_a100_and_counts_three_gemm_passes():
    from planner.training.inputs import RECOMPUTE_LEVEL
    from planner.training.step import microbatch_gemm_kernels

    # Training's documented efficiency comes from A100 runs (Megatron-LM): A100 keeps it, H100 BF16 gets
    # 0.803337 / 0.869231 = 0.92419 of it, a device without a published MAMF keeps it.
    assert ge.training_ceiling_ratio("a100-80gb", "bf16") == pytest.approx(1.0)
    assert ge.training_ceiling_ratio("h100-sxm", "bf16") == pytest.approx(0.92419, abs=1e-5)
    assert ge.training_ceiling_ratio("l40s", "bf16") == 1.0
    # 32 layers x 4 GEMMs x 3 passes = 384 kernels; full recomputation of every layer adds a forward: 512;
    # of half the layers: 448; selective recomputation repeats no GEMM.
    assert microbatch_gemm_kernels(32, RECOMPUTE_LEVEL["none"], 1.0) == 384
    assert microbatch_gemm_kernels(32, RECOMPUTE_LEVEL["full"], 1.0) == 512
    assert microbatch_gemm_kernels(32, RECOMPUTE_LEVEL["full"], 0.5) == 448
    assert microbatch_gemm_kernels(32, RECOMPUTE_LEVEL["selective"], 1.0) == 384
    levels = np.array([RECOMPUTE_LEVEL["none"], RECOMPUTE_LEVEL["full"]])
    assert list(microbatch_gemm_kernels(32, levels, 1.0)) == [384, 512]
