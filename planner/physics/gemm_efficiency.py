"""GEMM efficiency by shape and GPU generation: what fraction of the dense peak a matmul of shape (M, N, K)
reaches on a given accelerator, from published measurements.

Two published effects, one function each:

1. **The generation's ceiling** (`gemm_ceiling`): even a large, perfectly aligned GEMM does not reach the
   datasheet peak, and how far it stays below differs by generation and number format. Figures are the
   Maximum Achievable Matmul FLOPS (MAMF) of Stas Bekman's ml-engineering handbook
   (github.com/stas00/ml-engineering, compute/accelerator/README.md, "Maximum Achievable Matmul FLOPS
   comparison table", mean of 100 iterations after 50 warm-up, torch 2.5-2.10), MAMF / dense peak:

   | accelerator | BF16 | FP8 |
   |---|---|---|
   | A100 SXM   | 271.2 / 312 = 86.9 % | (no FP8 tensor cores) |
   | H100 SXM   | 794.5 / 989 = 80.3 % | 1402.6 / 1979 = 70.9 % |
   | H200 SXM   | "the same" as H100 = 80.3 % | 1453.4 / 1979 = 73.4 % |
   | B200 SXM   | 1745.0 / 2250 = 77.6 % | 3432.5 / 4500 = 76.3 % |
   | B300 SXM   | 1769.0 / 2250 = 78.6 % | 3353.3 / 4500 = 74.5 % |
   | GB200      | 1822.0 / 2500 = 72.9 % | 3615.6 / 5000 = 72.3 % |
   | MI300X     | 668.4 / 1300 = 51.4 % | 51.4 % x 1273 / 708 / 2 = 46.2 % (a) |
   | MI325X     | 784.9 / 1300 = 60.4 % | 60.4 % x 1519 / 843 / 2 = 54.4 % (a) |
   | MI355X     | 1565.0 / 2300 = 68.0 % | - |
   | Gaudi 3    | 1243.0 / 1677 = 74.1 % | 1289.5 / 1677 = 76.9 % |

   (a) AMD publishes the Max-Achievable FLOPs of both formats on one stack (ROCm blog "Measuring Max-Achievable
   FLOPs - Part 2", 2025-02-28, Table 1, hipBLASLt-bench at the best shape: MI300X BF16 708, FP8 1273 TFLOPs;
   MI325X 843 and 1519); its FP8 / BF16 ratio carries the table's BF16 figure to FP8, whose dense peak is twice
   BF16's.

   and NVFP4 on B200: 6624 / 9000 = 73.6 % (Bekman, ml-engineering training/dtype.md "FP4 formats", torch 2.14).
   A format that runs at the same tensor-core rate as a measured one reads its figure (fp16 -> BF16, int8 ->
   FP8); one with neither falls back to BF16.

   Devices without a published MAMF use `REFERENCE_CEILING` (H100 SXM BF16), so their plans do not move.

2. **The fixed cost of a GEMM kernel** (`GEMM_TAIL_SECONDS`, `gemm_fraction`): a small GEMM cannot fill the
   GPU for its whole duration (pipeline fill and drain, the last partial wave of tiles; NVIDIA, "Matrix
   Multiplication Background User's Guide", Sec. 3 "Dimension quantization effects"). Modelled as a fixed time
   per kernel on top of the work at the ceiling rate: t = 2MNK / (ceiling x peak) + t0. t0 from published
   cuBLAS timings on B200 (pyptx.dev/performance, "cuBLAS TFLOPS" column, PyTorch 2.8 / CUDA 12.8, BF16):
   4096 x 8192 x 8192 at 1652 TFLOP/s (saturated), 2048^3 at 1006 and 4096^3 at 1532 TFLOP/s:
   2048^3: 2 x 2048^3 / 1006e12 - 2 x 2048^3 / 1652e12 = 17.08 - 10.40 = 6.68 us;
   4096^3: 2 x 4096^3 / 1532e12 - 2 x 4096^3 / 1652e12 = 89.71 - 83.20 = 6.51 us; mean 6.6 us.

How the engine uses them (`planner.physics.roofline.shaped_compute_seconds`): the phase efficiencies in
`planner.physics.efficiency.Efficiency` are stated for a large GEMM on the reference generation; a step's
compute time is its FLOPs at phase efficiency x (ceiling / REFERENCE_CEILING), plus t0 for each GEMM kernel
it launches. A calibration fitted on the user's device divides both out at the probe's own shape, so it
reproduces its fitted points (`planner.calibration.fit`). Training the same way
(`planner.training.step.microbatch_time`), with two differences: its documented efficiency comes from Megatron-LM
runs on A100 (Narayanan et al. 2021), so its reference is `TRAINING_REFERENCE_CEILING` (A100 SXM BF16), and a
micro-batch runs each forward GEMM three times (forward, input and weight gradients), plus once more per layer
that full recomputation repeats.

A calibration that timed GEMMs of several sizes on the user's GPU fits both numbers of that device
(`planner.calibration.reference.fit_gemm_shape`); a plan on that GPU passes them as `measured_ceiling` /
`measured_tail_seconds` and they replace the table's (`planner.calibration_record.CalibrationRecord.gemm_shape_for`).

Everything broadcasts over numpy arrays (DESIGN rule 4).
"""

from __future__ import annotations

from planner.arrays import maximum, minimum

# H100 SXM BF16 MAMF / peak: the GPU and format the documented phase efficiencies are stated for.
REFERENCE_CEILING = 794.5 / 989.0

# Per catalog accelerator id: {compute format: MAMF / dense peak} (table in the module docstring).
MAMF_FRACTIONS: dict[str, dict[str, float]] = {
    "a100-40gb": {"bf16": 271.2 / 312.0},
    "a100-80gb": {"bf16": 271.2 / 312.0},
    "h100-sxm": {"bf16": 794.5 / 989.0, "fp8": 1402.6 / 1979.0},
    "h200": {"bf16": 794.5 / 989.0, "fp8": 1453.4 / 1979.0},
    "b200": {"bf16": 1745.0 / 2250.0, "fp8": 3432.5 / 4500.0, "fp4": 6624.0 / 9000.0},
    "b300": {"bf16": 1769.0 / 2250.0, "fp8": 3353.3 / 4500.0},
    "gb200-nvl72": {"bf16": 1822.0 / 2500.0, "fp8": 3615.6 / 5000.0},
    "mi300x": {"bf16": 668.4 / 1300.0, "fp8": 668.4 / 1300.0 * (1273.0 / 708.0) / 2},
    "mi325x": {"bf16": 784.9 / 1300.0, "fp8": 784.9 / 1300.0 * (1519.0 / 843.0) / 2},
    "mi355x": {"bf16": 1565.0 / 2300.0},
    "gaudi3": {"bf16": 1243.0 / 1677.0, "fp8": 1289.5 / 1677.0},
}

# Block-scaled FP8 GEMMs (weights in 128 x 128 blocks and activations in 1 x 128 groups, each with its own scale:
# DeepSeek-V3/R1, Kimi K2, MiniMax, the Qwen3 and GLM FP8 releases) on Hopper, whose tensor cores take one scale
# per operand, so the kernel rescales every K block's partial sums itself: their rate as a share of the same
# device's BF16 GEMM rate. vLLM PR #23280 (github.com/vllm-project/vllm/pull/23280, 2025-09, H100 80GB HBM3,
# CUTLASS block-FP8 kernel vs torch BF16 on DeepSeek-V3's N=2112, K=7168), TFLOP/s at batches 2048, 4096, 8192:
# 426.6 / 648.2, 456.9 / 715.8, 489.7 / 666.4 = 0.658, 0.638, 0.735; mean 0.677. Hopper only: Blackwell's tensor
# cores apply block scales themselves; no figure is published for Ada or AMD here, so they keep the FP8 MAMF.
BLOCK_SCALED_FP8_OF_BF16: dict[str, float] = {
    gpu: (426.6 / 648.2 + 456.9 / 715.8 + 489.7 / 666.4) / 3
    for gpu in ("h100-sxm", "h100-pcie", "h100-nvl", "h200", "h20")
}

# Block-scaled FP8 GEMMs at small M on Hopper never run below a fixed kernel time well above cuBLAS BF16's, whatever
# their weights' read: vLLM PR #23280 (H100 80GB HBM3, DeepSeek-V3's N=2112, K=7168), TFLOP/s at batch 1 and 16
# (2 M N K / rate): Triton 1.298436 / 20.755163 = 23.32 / 23.34 us, CUTLASS 0.893065 / 13.940020 = 33.90 / 34.75 us,
# where the FP8 weights' read alone is 15.1 MB / 3.35 TB/s = 4.5 us (torch BF16 at batch 1: 9.9 us, its 30.3 MB
# read). The mean of the two batches per kernel is the time each such GEMM takes while a step's rows are few.
# "triton": w8a8_block_fp8_matmul, vLLM's block-FP8 linear kernel of the V0 releases; "cutlass": the SM90 CUTLASS
# kernel of that PR. "deepgemm": DeepSeek's DeepGEMM, which vLLM V1 runs for block-FP8 linears on Hopper where it
# is installed (vllm/envs.py "VLLM_USE_DEEP_GEMM" default "1"): deepseek-ai/DeepGEMM README @55ab91f (2025-03-25,
# H800), "Normal GEMMs for dense models", M=64 N=2112 K=7168 at 206 TFLOPS = 9.41 us, its smallest published M.
BLOCK_FP8_SMALL_M_GEMM_SECONDS = {
    "triton": (2 * 2112 * 7168 / 1.298436e12 + 16 * 2 * 2112 * 7168 / 20.755163e12) / 2,
    "cutlass": (2 * 2112 * 7168 / 0.893065e12 + 16 * 2 * 2112 * 7168 / 13.940020e12) / 2,
    "deepgemm": 2 * 64 * 2112 * 7168 / 206e12,
}


def block_fp8_gemms_per_layer(stage_layers, dense_layers, moe_layers_with_shared_experts):
    """Of a layer's `GEMMS_PER_LAYER`, the dense GEMMs over block-scaled FP8 weights, averaged over the stage: the
    attention's two (QKV, output) in every layer, and the MLP's two in dense layers and beside routed experts in
    MoE layers with shared experts (the routed experts' pair is the fused-MoE call's, `moe_efficiency`)."""
    return 2 + 2 * (dense_layers + moe_layers_with_shared_experts) / maximum(stage_layers, 1)


# A100 SXM BF16 MAMF / peak: the GPU the documented training efficiency is stated for (its source, Megatron-LM
# runs in Narayanan et al. 2021, Table 1, are on A100s).
TRAINING_REFERENCE_CEILING = 271.2 / 312.0

# Fixed time per GEMM kernel beyond its work at the ceiling rate (docstring, item 2), seconds.
GEMM_TAIL_SECONDS = 6.6e-6

# GEMM kernels per transformer layer in a forward pass: QKV, attention output, MLP up (+gate, fused), MLP down.
GEMMS_PER_LAYER = 4
# A training pass runs each forward GEMM three times: forward, input gradient, weight gradient (Narayanan et al.
# 2021, Sec. 5.1: the backward pass is twice the forward's FLOPs).
TRAINING_GEMMS_PER_FORWARD_GEMM = 3


def gemm_ceiling(gpu_id: str, compute_dtype: str) -> float:
    """MAMF / dense peak of `gpu_id` for GEMMs in `compute_dtype` (the tensor-core format: "bf16", "fp8", ...).

    fp16 reads the BF16 figure and int8 the FP8 one (the same tensor-core rate); a format without a published
    figure (fp8 on MI355X, fp4 but on B200) or a device without any falls back to BF16, then to `REFERENCE_CEILING`."""
    fractions = MAMF_FRACTIONS.get(gpu_id, {})
    key = {"fp16": "bf16", "int8": "fp8"}.get(compute_dtype, compute_dtype)
    return fractions.get(key, fractions.get("bf16", REFERENCE_CEILING))


def ceiling_ratio(gpu_id: str, compute_dtype: str, measured_ceiling: float | None = None) -> float:
    """The device's GEMM ceiling relative to the reference (H100 SXM BF16): what the documented phase
    efficiencies are multiplied by on this device. 1.0 where nothing is published; a calibration's
    `measured_ceiling` of this device (MAMF / peak, fitted) replaces the table's."""
    if measured_ceiling is not None:
        return measured_ceiling / REFERENCE_CEILING
    return gemm_ceiling(gpu_id, compute_dtype) / REFERENCE_CEILING


def training_ceiling_ratio(gpu_id: str, compute_dtype: str, measured_ceiling: float | None = None) -> float:
    """The device's GEMM ceiling relative to the training reference (A100 SXM BF16), what the documented training
    efficiency is multiplied by on this device; 1.0 where nothing is published (the plan does not move). A
    calibration's `measured_ceiling` of this device replaces the table's."""
    if measured_ceiling is not None:
        return measured_ceiling / TRAINING_REFERENCE_CEILING
    if gpu_id not in MAMF_FRACTIONS:
        return 1.0
    return gemm_ceiling(gpu_id, compute_dtype) / TRAINING_REFERENCE_CEILING


def gemm_tail_seconds(is_gpu: bool, measured_tail_seconds: float | None = None) -> float:
    """The fixed time per GEMM kernel on this device: `GEMM_TAIL_SECONDS` on a GPU; 0 on a CPU or other host
    device, where waves of thread blocks do not apply. A calibration's `measured_tail_seconds` of this device
    replaces either."""
    if measured_tail_seconds is not None:
        return measured_tail_seconds
    return GEMM_TAIL_SECONDS if is_gpu else 0.0


def gemm_fraction(m, n, k, ceiling, peak_flops_per_second, tail_seconds: float = GEMM_TAIL_SECONDS):
    """Achieved fraction of the dense peak for one (M x K) @ (K x N) GEMM: its 2MNK FLOPs at `ceiling` x peak
    plus the kernel's fixed `tail_seconds`, as a fraction of peak:

        fraction = ceiling x W / (W + t0 x ceiling x peak),  W = 2 M N K.

    Tends to `ceiling` for large GEMMs and falls as the work shrinks below t0 x the achievable rate
    (6.6 us x 794.5 TFLOP/s = 5.2 GFLOP on H100, e.g. M = 160 tokens at N = K = 4096)."""
    work = 2.0 * m * n * k
    return ceiling * work / (work + tail_seconds * ceiling * peak_flops_per_second)


def phase_compute_efficiency(phase_efficiency, ratio):
    """A phase efficiency (stated for the reference GEMM ceiling) on a device whose ceiling is `ratio` x the
    reference's, never above 1."""
    return minimum(phase_efficiency * ratio, 1.0)


def block_scaled_fp8_ceiling(gpu_id: str, bf16_ceiling: float, bf16_peak: float, fp8_peak: float) -> float | None:
    """The ceiling (as a share of the FP8 peak) of block-scaled FP8 GEMMs on `gpu_id`: `BLOCK_SCALED_FP8_OF_BF16`
    x the device's BF16 GEMM rate (its `bf16_ceiling` x `bf16_peak`); None where no figure is published (the FP8
    MAMF then applies)."""
    share = BLOCK_SCALED_FP8_OF_BF16.get(gpu_id)
    if share is None or not fp8_peak:
        return None
    return share * bf16_ceiling * bf16_peak / fp8_peak


__all__ = [
    "BLOCK_FP8_SMALL_M_GEMM_SECONDS",
    "BLOCK_SCALED_FP8_OF_BF16",
    "GEMMS_PER_LAYER",
    "GEMM_TAIL_SECONDS",
    "MAMF_FRACTIONS",
    "REFERENCE_CEILING",
    "TRAINING_GEMMS_PER_FORWARD_GEMM",
    "TRAINING_REFERENCE_CEILING",
    "block_fp8_gemms_per_layer",
    "block_scaled_fp8_ceiling",
    "ceiling_ratio",
    "gemm_ceiling",
    "gemm_fraction",
    "gemm_tail_seconds",
    "phase_compute_efficiency",
    "training_ceiling_ratio",
]
