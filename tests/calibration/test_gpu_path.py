"""The CUDA path, with torch.cuda faked at the device boundary (tests/calibration/fakes.py): tensors stay
on the CPU, every call that would reach the driver (Event timing, synchronize, max_memory_allocated,
mem_get_info, memory_reserved, device properties) answers from the fake. Plus one real torch.distributed
all-reduce over gloo, the same code NCCL runs on GPUs."""

from __future__ import annotations

import threading

import pytest
import torch

from planner import plan
from planner.calibration import microbench
from planner.calibration.context import ProfileContext
from planner.calibration.device import (
    CpuBackend,
    CudaBackend,
    catalog_id_for_device,
    make_backend,
)
from planner.calibration.errors import (
    ProfileAborted,
    ProfileCancelled,
    ProfileUnavailable,
)
from planner.calibration.profile import run_profile
from planner.calibration_record import AllReduceMeasurement, ProfileSettings
from planner.inference.scenario import InferenceScenario
from planner.physics.memory import CUDA_CONTEXT_BYTES
from tests.calibration.profiling import run_profile_privately

from .fakes import GIB, FakeCuda, fake_backend

FAST = dict(seconds=1.0, model="qwen2.5-0.5b", dtype="fp32")
TINY = dict(FAST, seconds=0.5)


def test_cuda_requested_but_absent_is_a_clear_error():
    with pytest.raises(ProfileUnavailable, match="CUDA is not available") as info:
        make_backend("cuda", cuda=FakeCuda(available=False))
    assert "--device cpu" in str(info.value)
    assert isinstance(make_backend("auto", cuda=FakeCuda(available=False)), CpuBackend)
    assert isinstance(make_backend("auto", cuda=FakeCuda(), tensor_device="cpu"), CudaBackend)


@pytest.mark.parametrize(
    "name, accel",
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA A100-SXM4-40GB", "a100-40gb"),
        ("NVIDIA A100-SXM4-80GB", "a100-80gb"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA L4", "l4"),
        ("NVIDIA A10G", "a10g"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
        ("AMD Instinct MI300X", "mi300x"),
        ("NVIDIA B200", "b200"),
        ("Tesla T4", None),
    ],
)
def test_device_names_map_to_catalog_accelerators(name, accel):
    assert catalog_id_for_device(name) == accel


def test_device_info_and_dtypes_come_from_the_cuda_namespace():
    backend, cuda = fake_backend(capability=(9, 0))
    info = backend.info()
    assert (info.kind, info.name, info.compute_capability, info.memory_bytes) == (
        "cuda",
        "NVIDIA H100 80GB HBM3",
        "9.0",
        80 * GIB,
    )
    assert info.nccl_version == "2.21.5" and backend.catalog_id() == "h100-sxm"
    assert backend.supported_dtypes() == ("fp32", "bf16", "fp16", "fp8")
    ampere, _ = fake_backend(capability=(8, 0))
    assert "fp8" not in ampere.supported_dtypes()
    assert "8.0" in ampere.fp8_unsupported_reason()
    old, _ = fake_backend(capability=(7, 5), bf16=False)
    assert old.default_dtype() == "fp16" and "bf16" not in old.supported_dtypes()


def test_times_come_from_cuda_events_after_a_synchronize():
    ticks = iter(range(0, 1000, 2))  # each event records 2 s after the previous one
    backend, cuda = fake_backend(clock=lambda: float(next(ticks)))
    assert backend.time_call(lambda: None) == pytest.approx(2.0)
    assert backend.time_call(lambda: None, inner=4) == pytest.approx(0.5)
    assert cuda.calls["Event.record"] == 4 and cuda.calls["Event.elapsed_time"] == 2
    assert cuda.calls["synchronize"] >= 2


def test_memory_queries_go_to_the_allocator_and_the_driver():
    backend, cuda = fake_backend(total=80 * GIB, free=2 * GIB, reserved=77 * GIB, allocated=70 * GIB, peak=3 * GIB)
    backend.reset_peak_memory()
    assert backend.peak_allocated_bytes() == 3 * GIB
    assert backend.memory_info() == (2 * GIB, 80 * GIB)
    assert backend.runtime_overhead_bytes() == 1 * GIB  # used 78 GiB - reserved 77 GiB
    assert backend.allocator_slack_bytes() == 7 * GIB
    assert backend.is_oom(torch.OutOfMemoryError("CUDA out of memory"))
    assert not backend.is_oom(RuntimeError("shape mismatch"))


def test_fp8_matmuls_run_through_scaled_mm_where_the_device_has_fp8():
    backend, _ = fake_backend(capability=(9, 0))
    ctx = ProfileContext(backend, 5.0, 1 << 30)
    skipped: dict[str, str] = {}
    results = microbench.matmul_ceilings(ctx, ["fp8"], 0.3, skipped)
    assert results and {m.dtype for m in results} == {"fp8"} and not skipped
    assert all(m.flops_per_second > 0 for m in results)


@pytest.fixture(scope="module")
def gpu_record(tmp_path_factory):
    backend, cuda = fake_backend()
    record = run_profile_privately(tmp_path_factory, ProfileSettings(device="cuda", **FAST), backend=backend)
    return record, cuda


def test_a_profile_on_the_fake_gpu_uses_the_device_boundary(gpu_record):
    record, cuda = gpu_record
    assert record.complete and record.device.kind == "cuda" and record.reference_gpu == "h100-sxm"
    assert record.dtype == "fp32"
    for call in ("mem_get_info", "reset_peak_memory_stats", "max_memory_allocated", "synchronize", "Event.record"):
        assert cuda.calls[call] > 0, call
    assert "allreduce" in record.ceilings.skipped  # one GPU
    peaks = [r for r in record.predicted_vs_measured if r.quantity.endswith("peak allocated")]
    assert {r.phase for r in peaks} == {"prefill", "decode", "train"}
    assert all(r.measured == cuda.peak for r in peaks)


def test_the_runtime_overhead_correction_is_measured_and_applied(gpu_record):
    record, _ = gpu_record
    assert record.runtime_overhead_correction_bytes == pytest.approx(1 * GIB - CUDA_CONTEXT_BYTES)
    row = next(r for r in record.predicted_vs_measured if r.phase == "runtime")
    assert row.measured == 1 * GIB and row.predicted == CUDA_CONTEXT_BYTES
    assert row.calibrated_error_fraction == pytest.approx(0.0)
    scenario = InferenceScenario(model="llama-3.1-8b", gpu="h100-sxm", num_gpus=1, tensor_parallel=1)
    before, after = plan(scenario), plan(scenario, calibration=record)
    assert after.memory.components["runtime_overhead_bytes"] - before.memory.components[
        "runtime_overhead_bytes"
    ] == pytest.approx(record.runtime_overhead_correction_bytes)


def test_the_memory_cap_limits_every_allocation():
    backend, cuda = fake_backend(free=64 << 20)  # 64 MiB free -> the profile may use 32 MiB
    record = run_profile(ProfileSettings(device="cuda", **FAST), backend=backend)
    assert max(b.buffer_bytes for b in record.ceilings.bandwidth) <= 16 << 20
    assert all((m.m * m.k + m.k * m.n + m.m * m.n) * 4 <= 32 << 20 for m in record.ceilings.matmul if m.dtype == "fp32")
    assert "memory cap 32.0 MiB" in " ".join(record.proxy.caps)


def test_several_gpus_measure_the_all_reduce_and_fit_communication(monkeypatch):
    calls = {}

    def fake_allreduce(world_size, sizes, **kwargs):
        calls.update(world_size=world_size, **kwargs)
        # 300 GB/s of bus bandwidth on an NVLink (450 GB/s) H100 pair: 2(n-1)/n = 1 for n = 2.
        return [
            AllReduceMeasurement(
                backend="nccl", world_size=world_size, message_bytes=s, seconds=s / 300e9 + 3e-6, reps=10
            )
            for s in sizes
        ]

    monkeypatch.setattr(microbench, "allreduce_bus_bandwidth", fake_allreduce)
    backend, _ = fake_backend(devices=2)
    record = run_profile(ProfileSettings(device="cuda", **FAST), backend=backend)
    assert calls["world_size"] == 2 and calls["backend"] == "nccl" and calls["device"] == "cuda"
    assert record.efficiency.communication == pytest.approx(300 / 450, rel=1e-6)
    rows = [r for r in record.predicted_vs_measured if r.phase == "allreduce"]
    assert rows and {r.role for r in rows} == {"fit", "holdout"}


def test_a_failing_all_reduce_is_skipped_with_its_message(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("all-reduce failed: rank 1: NCCL error: unhandled system error")

    monkeypatch.setattr(microbench, "allreduce_bus_bandwidth", broken)
    backend, _ = fake_backend(devices=2)
    record = run_profile(ProfileSettings(device="cuda", **TINY), backend=backend)
    assert record.complete and "NCCL error" in record.ceilings.skipped["allreduce"]


def test_out_of_memory_ends_with_what_was_measured():
    backend, cuda = fake_backend(oom_on_reset=2)  # the second phase's allocator reset raises
    with pytest.raises(ProfileAborted) as info:
        run_profile(ProfileSettings(device="cuda", **FAST), backend=backend)
    message = str(info.value)
    assert "out of memory during proxy" in message and "Measured so far:" in message and "matmul" in message
    partial = info.value.partial
    assert partial is not None and not partial.complete and "out of memory" in partial.stopped_reason
    assert partial.ceilings.matmul and partial.phases  # what was measured is kept
    assert cuda.calls["empty_cache"] > 0


def test_cancel_stops_between_measurements_and_keeps_the_partial_record():
    cancel = threading.Event()

    def progress(fraction, message):
        if "decode" in message:
            cancel.set()

    backend, _ = fake_backend()
    with pytest.raises(ProfileCancelled) as info:
        run_profile(ProfileSettings(device="cuda", **FAST), backend=backend, progress=progress, cancel=cancel)
    partial = info.value.partial
    assert "cancelled" in str(info.value) and partial.stopped_reason == "cancelled"
    assert {p.name for p in partial.phases} >= {"prefill"} and "train" not in {p.name for p in partial.phases}


def test_an_unknown_gpu_is_calibrated_against_its_own_ceilings():
    backend, _ = fake_backend(name="Tesla T4", capability=(7, 5), bf16=False)
    record = run_profile(ProfileSettings(device="cuda", **TINY), backend=backend)
    assert record.reference_gpu == "custom"
    assert any("not in the hardware catalog" in n for n in record.notes)
    with pytest.raises(ProfileUnavailable, match="unknown GPU"):
        run_profile(ProfileSettings(device="cuda", reference_gpu="no-such-gpu", **TINY), backend=backend)


def test_all_reduce_over_torch_distributed_gloo():
    results = microbench.allreduce_bus_bandwidth(
        2, [1 << 16, 1 << 20], backend="gloo", device="cpu", seconds_per_size=0.05, timeout_seconds=60
    )
    assert [r.message_bytes for r in results] == [1 << 16, 1 << 20]
    for r in results:
        assert r.world_size == 2 and r.seconds > 0 and r.reps >= 1
        assert r.bus_bytes_per_second == pytest.approx(r.message_bytes / r.seconds)  # 2(n-1)/n = 1 at n = 2


def test_a_gpu_profile_fits_alpha_and_the_gemm_curve_and_plans_on_that_gpu_use_them(monkeypatch):
    """The profile's record carries the fitted alpha (two GPUs, several all-reduce sizes) and the GEMM curve
    (square matmuls at 2048 and above), and a TP=2 plan on the H100 it measured reads both."""
    from planner.calibration.reference import fit_allreduce, fit_gemm_shape
    from planner.calibration_record import MatmulMeasurement

    def curve_matmuls(ctx, dtypes, budget_seconds, skipped):
        # 0.70 of the fp32 peak (66.9 TFLOP/s) plus 8 us per kernel: 2048^3 takes 366.9 us + 8 us.
        return [
            MatmulMeasurement(
                dtype="fp32", shape="square", m=n, n=n, k=n, seconds=2 * n**3 / (0.7 * 66.9e12) + 8e-6, reps=5
            )
            for n in (1024, 2048, 4096)
        ]

    def fake_allreduce(world_size, sizes, **kwargs):
        return [
            AllReduceMeasurement(
                backend="nccl", world_size=world_size, message_bytes=s, seconds=s / 300e9 + 9e-6, reps=9
            )
            for s in sizes
        ]

    monkeypatch.setattr(microbench, "matmul_ceilings", curve_matmuls)
    monkeypatch.setattr(microbench, "allreduce_bus_bandwidth", fake_allreduce)
    backend, _ = fake_backend(devices=2)
    record = run_profile(ProfileSettings(device="cuda", **FAST), backend=backend)
    (gemm,) = record.gemm_shapes
    assert gemm.dtype == "fp32" and gemm.sizes == [2048, 4096]
    assert gemm.ceiling == pytest.approx(0.7, rel=1e-9) and gemm.tail_seconds == pytest.approx(8e-6, rel=1e-6)
    assert gemm == fit_gemm_shape(record.ceilings.matmul, "fp32", 66.9e12)
    from planner.calibration.reference import Reference

    alpha = fit_allreduce(record.ceilings.allreduce, Reference.from_catalog("h100-sxm"), 0.5).latency_seconds
    assert record.link_latency_seconds == pytest.approx(alpha) and 0 < alpha < 9e-6
    assert "gemm_shape_fp32" in record.efficiency_notes
    # The record's fitted phase points still round-trip through the fitted curve.
    fitted = [r for r in record.predicted_vs_measured if r.role == "fit" and r.phase in ("prefill", "train")]
    assert fitted and all(abs(r.calibrated_error_fraction) < 1e-6 for r in fitted)
    scenario = InferenceScenario(
        model="llama-3.1-8b", gpu="h100-sxm", num_gpus=2, tensor_parallel=2, weight_dtype="fp32", kv_cache_dtype="fp32"
    )
    with_terms = plan(scenario, record)
    stored = record.model_dump(exclude={"mapped_to_any_gpu"})
    without = record.from_json_data({**stored, "link_latency_seconds": None, "gemm_shapes": []})
    assert (
        with_terms.performance.decode.communication_seconds
        != plan(scenario, without).performance.decode.communication_seconds
    )
    assert with_terms.performance.prefill.compute_seconds != plan(scenario, without).performance.prefill.compute_seconds
