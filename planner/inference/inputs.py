"""What the inference formulas read: the scenario's numbers, the accelerator's, and the replica's shape.

`InferenceInputs.from_scenario` and `HardwareInputs.from_accelerator` build them from a validated
`InferenceScenario`. Every numeric field holds a Python number for `plan()` or a numpy array of one
shape for `planner.search.sweep` (DESIGN rule 4), which swaps fields with `dataclasses.replace`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from planner.arrays import Flag, Number, ceil_div, maximum
from planner.calibration_record import CalibrationRecord, device_terms_for
from planner.dtypes import BYTES_PER_ELEMENT, high_precision_dtype, kv_bytes_per_element, weight_bytes_per_element
from planner.hardware.catalog import Accelerator
from planner.inference.adapters import AdapterInputs, adapter_inputs
from planner.inference.scenario import InferenceScenario
from planner.model.architecture import ModelArchitecture
from planner.physics import collectives, gemm_efficiency, moe_efficiency
from planner.physics import memory as mem
from planner.physics.communication import Link
from planner.physics.energy import accelerator_power
from planner.physics.flops import vision_encoder_flops
from planner.physics.runtimes import DEFAULT_RUNTIME, runtime_profile


@dataclass(frozen=True, slots=True)
class HardwareInputs:
    """The accelerator numbers the formulas use, per GPU (arrays when sweeping several GPU types)."""

    memory_capacity_bytes: Number
    bandwidth_bytes_per_second: Number
    peak_flops_per_second: Number  # dense, at Accelerator.gemm_dtype of the weights (prefill and decode alike)
    # The attention kernels' math runs in the KV cache's format, not the weights': FP8 where the cache is FP8
    # (FlashAttention-3 / FlashInfer FP8 paths), else 16-bit (an FP8 checkpoint with a BF16 cache attends in
    # BF16). Dense peak of that format and its GEMM ceiling relative to the reference.
    attention_peak_flops_per_second: Number
    attention_ceiling_ratio: Number
    link_bytes_per_second: Number  # the fast interconnect inside a node
    link_latency_seconds: Number
    inter_node_bytes_per_second: Number  # the network between nodes, per GPU
    gpus_per_node: Number
    is_accelerator: Flag  # False for a CPU "device" (no CUDA context, graphs or NCCL buffers)
    usd_per_gpu_hour: Number
    # The interconnect lets GPUs map each other's memory (NVLink / NVSwitch / xGMI): custom one-shot / two-shot
    # all-reduce kernels run inside its domain (planner.physics.collectives.has_peer_link).
    peer_link: Flag = False
    # GEMM ceiling (MAMF / peak) of this device and compute format relative to the reference GPU the phase
    # efficiencies are stated for, and the fixed time per GEMM kernel (planner.physics.gemm_efficiency).
    gemm_ceiling_ratio: Number = 1.0
    gemm_tail_seconds: Number = 0.0
    # The fused-MoE calls' ceiling ratio: the weights' format without the block-scaled FP8 penalty of the dense
    # GEMMs (their published rates were measured with per-tensor scales: planner.physics.moe_efficiency).
    expert_ceiling_ratio: Number = 1.0
    # The routed experts run as block-scaled FP8 (fp8 weights in 128 x 128 blocks on a device with FP8 GEMMs).
    block_fp8_experts: Flag = False
    # The dense GEMMs run over block-scaled FP8 weights on Hopper, whose small-M kernels take a published fixed
    # time (planner.physics.gemm_efficiency.BLOCK_FP8_SMALL_M_GEMM_SECONDS).
    block_fp8_dense: Flag = False
    # The routed experts' FLOP rate in their own format as a share of the documented mean
    # (planner.physics.moe_efficiency.expert_compute_format_ratio).
    expert_compute_ratio: Number = 1.0
    # Power per GPU (planner.physics.energy.accelerator_power): the board's and an idle device's, in watts.
    board_watts: Number = 0.0
    idle_watts: Number = 0.0

    @classmethod
    def from_accelerator(
        cls,
        accel: Accelerator,
        weight_dtype: str,
        usd_per_gpu_hour: float,
        calibration: CalibrationRecord | None = None,
        kv_cache_dtype: str = "bf16",
        fp8_block_scaled: bool = False,
    ) -> HardwareInputs:
        """The catalog's numbers; a calibration that measured this GPU (`CalibrationRecord.device_terms_apply`)
        replaces the link's per-step latency and the GEMM ceiling and kernel time with the ones it fitted.
        `fp8_block_scaled`: FP8 weights scaled in blocks (`checkpoint_precision.fp8_block_scaled`), whose dense
        GEMMs reach a published share of the BF16 rate on Hopper (`gemm_efficiency.BLOCK_SCALED_FP8_OF_BF16`)."""
        gemm_dtype = accel.gemm_dtype(weight_dtype)
        attention_dtype = attention_compute_dtype(accel, kv_cache_dtype)
        latency, fitted = device_terms_for(calibration, accel.id, gemm_dtype)
        power = accelerator_power(accel)
        _, attention_fitted = device_terms_for(calibration, accel.id, attention_dtype)
        gemm_ratio = gemm_efficiency.ceiling_ratio(accel.id, gemm_dtype, fitted.ceiling if fitted is not None else None)
        dense_ratio, block_penalised = gemm_ratio, False
        if fp8_block_scaled and gemm_dtype == "fp8":
            _, bf16_fitted = device_terms_for(calibration, accel.id, "bf16")
            bf16_ceiling = (
                bf16_fitted.ceiling if bf16_fitted is not None else gemm_efficiency.gemm_ceiling(accel.id, "bf16")
            )
            block = gemm_efficiency.block_scaled_fp8_ceiling(
                accel.id, bf16_ceiling, accel.peak_flops("bf16"), accel.peak_flops("fp8")
            )
            if block is not None:  # Hopper: the published share of BF16, and the small-M kernel floor
                dense_ratio, block_penalised = gemm_efficiency.ceiling_ratio(accel.id, gemm_dtype, block), True
        return cls(
            memory_capacity_bytes=float(accel.memory_bytes),
            bandwidth_bytes_per_second=accel.memory_bandwidth_bytes_per_second,
            peak_flops_per_second=accel.peak_flops(gemm_dtype),
            attention_peak_flops_per_second=accel.peak_flops(attention_dtype),
            attention_ceiling_ratio=gemm_efficiency.ceiling_ratio(
                accel.id, attention_dtype, attention_fitted.ceiling if attention_fitted is not None else None
            ),
            link_bytes_per_second=accel.interconnect_bandwidth_bytes_per_second,
            link_latency_seconds=accel.interconnect_latency_seconds if latency is None else latency,
            inter_node_bytes_per_second=accel.scale_out_bandwidth_bytes_per_second,
            gpus_per_node=accel.gpus_per_node,
            is_accelerator=accel.vendor != "cpu",
            usd_per_gpu_hour=usd_per_gpu_hour,
            peer_link=collectives.has_peer_link(accel.interconnect.name if accel.interconnect else None),
            gemm_ceiling_ratio=dense_ratio,
            expert_ceiling_ratio=gemm_ratio,
            block_fp8_experts=bool(fp8_block_scaled and gemm_dtype == "fp8"),
            block_fp8_dense=block_penalised,
            expert_compute_ratio=moe_efficiency.expert_compute_format_ratio(weight_dtype, gemm_dtype),
            gemm_tail_seconds=gemm_efficiency.gemm_tail_seconds(
                accel.vendor not in ("cpu", "apple"), fitted.tail_seconds if fitted is not None else None
            ),
            board_watts=power.board_watts,
            idle_watts=power.idle_watts,
        )


def attention_compute_dtype(accel: Accelerator, kv_cache_dtype: str) -> str:
    """The format attention's math runs in on this device: FP8 where the KV cache is FP8 and the device has FP8
    tensor cores (vLLM's `--kv-cache-dtype fp8` "runs the entire attention computation (the QK and ScoreV
    matrix multiplications) in FP8": vLLM blog, 2026-04-22, "The State of FP8 KV-Cache and Attention
    Quantization in vLLM"), else the 16-bit format (other caches are dequantized to it)."""
    if kv_cache_dtype.startswith("fp8") and accel.supports("fp8"):
        return "fp8"
    return high_precision_dtype(kv_cache_dtype)


@dataclass(frozen=True, slots=True)
class InferenceInputs:
    """The scenario as numbers: layout, bytes per element, workload and serving-engine settings."""

    tensor_parallel: Number
    pipeline_parallel: Number
    expert_parallel: Number
    num_gpus: Number
    linear_bytes_per_element: Number  # per weight of a linear layer (int4, nvfp4, mxfp4: packed, with block metadata)
    high_precision_bytes_per_element: Number  # norms, biases, routers: the 16-bit (or fp32) copy
    embedding_bytes_per_element: Number
    kv_bytes_per_element: Number  # per cached key/value element
    activation_bytes_per_element: Number
    prompt_tokens: Number
    output_tokens: Number
    concurrency: Number  # sequences in flight, whole deployment
    kv_block_tokens: Number
    memory_utilization: Number  # the engine's share of device memory
    prefill_chunk_tokens: Number
    prefix_cache_hit_rate: Number
    honor_sliding_window: bool
    runtime_overhead_correction_bytes: Number  # from a calibration; 0 without one (per GPU type in a sweep)
    runtime: str = DEFAULT_RUNTIME  # planner.physics.runtimes: the engine's memory accounting
    attention_linear_bytes_per_element: Number | None = None  # attention projections stored apart from the rest
    image_encoder_flops: Number = 0.0  # the vision tower's FLOPs for one request's images (whole replica)
    images_per_request: Number = 0
    tokens_per_image: Number = 0  # language-model tokens one image becomes
    # Energy accounting (planner.physics.energy): the facility's PUE, the price and carbon of a kWh.
    pue: Number = 1.0
    electricity_usd_per_kwh: Number = 0.0
    carbon_kg_per_kwh: Number = 0.0
    # Multi-LoRA serving (planner.inference.adapters): the adapters' slots, kernels and swaps; None without adapters.
    # A sweep's frame holds per-row arrays (`adapters.frame_adapters`).
    adapters: AdapterInputs | None = None

    @classmethod
    def from_scenario(cls, s: InferenceScenario, runtime_overhead_correction_bytes: Number = 0.0) -> InferenceInputs:
        elements = element_bytes(s.weight_dtype, s.kv_cache_dtype, s.weight_group_size, s.quantize_embeddings)
        return cls(
            tensor_parallel=s.tensor_parallel,
            pipeline_parallel=s.pipeline_parallel,
            expert_parallel=s.expert_parallel,
            num_gpus=s.num_gpus,
            **elements,
            prompt_tokens=s.prompt_tokens + s.image_tokens_per_request,  # the language model sees both
            output_tokens=s.output_tokens,
            concurrency=engine_concurrency(
                s.concurrency,
                s.num_gpus,
                s.tensor_parallel * s.pipeline_parallel,
                s.traffic.max_num_seqs if s.traffic is not None else None,
            ),
            kv_block_tokens=s.kv_block_tokens,
            memory_utilization=s.gpu_memory_utilization,
            prefill_chunk_tokens=s.prefill_chunk_tokens,
            prefix_cache_hit_rate=s.prefix_cache_hit_rate,
            honor_sliding_window=s.honor_sliding_window,
            runtime_overhead_correction_bytes=runtime_overhead_correction_bytes,
            runtime=s.runtime,
            images_per_request=s.images_per_request,
            tokens_per_image=s.image_tokens_per_request / max(s.images_per_request, 1),
            image_encoder_flops=vision_encoder_flops(
                s.architecture(), s.images_per_request, s.image_tokens_per_request / max(s.images_per_request, 1)
            ),
            attention_linear_bytes_per_element=None
            if s.attention_weight_dtype is None
            else weight_bytes_per_element(s.attention_weight_dtype, s.weight_group_size),
            pue=s.pue,
            electricity_usd_per_kwh=s.electricity_usd_per_kwh,
            carbon_kg_per_kwh=s.carbon_kg_per_kwh,
            adapters=None
            if s.lora is None
            else adapter_inputs(
                s.lora,
                s.architecture(),
                s.runtime,
                s.tensor_parallel,
                s.pipeline_parallel,
                elements["activation_bytes_per_element"],
                s.accelerator().host_link_bandwidth_bytes_per_second,
            ),
        )


class ElementBytes(TypedDict):
    linear_bytes_per_element: float
    high_precision_bytes_per_element: float
    embedding_bytes_per_element: float
    kv_bytes_per_element: float
    activation_bytes_per_element: float


def element_bytes(
    weight_dtype: str, kv_cache_dtype: str, weight_group_size: int, quantize_embeddings: bool
) -> ElementBytes:
    """`InferenceInputs`' bytes-per-element fields for these formats: the one mapping from dtypes to bytes that a
    plan and a sweep (once per distinct format) both use."""
    linear = weight_bytes_per_element(weight_dtype, weight_group_size)
    high_precision = BYTES_PER_ELEMENT[high_precision_dtype(weight_dtype)]
    return ElementBytes(
        linear_bytes_per_element=linear,
        high_precision_bytes_per_element=high_precision,
        embedding_bytes_per_element=linear if quantize_embeddings else high_precision,
        kv_bytes_per_element=kv_bytes_per_element(kv_cache_dtype),
        activation_bytes_per_element=activation_bytes_per_element(weight_dtype),
    )


def activation_bytes_per_element(weight_dtype):
    """Activations run in the compute dtype: fp32 models in fp32, everything else (quantized too) in 16 bits."""
    return 4.0 if weight_dtype == "fp32" else 2.0


def hardware_link(
    group_span_gpus,
    hw: HardwareInputs,
    custom_allreduce: bool = False,
    participants: Number = 1,
    all_to_all: Flag = False,
) -> Link:
    """The link a group of `participants` GPUs over `group_span_gpus` consecutive GPUs of this hardware talks over
    (`communication.Link.spanning`: across nodes, as many NICs as the group has members per node; `participants`
    1, one GPU's NIC, for point-to-point sends); peer-memory all-reduces only where the runtime has them."""
    return Link.spanning(
        group_span_gpus,
        hw.gpus_per_node,
        hw.link_bytes_per_second,
        hw.inter_node_bytes_per_second,
        hw.link_latency_seconds,
        hw.peer_link if custom_allreduce else False,
        participants,
        all_to_all,
    )


def engine_concurrency(concurrency, num_gpus, gpus_per_replica, max_num_seqs_per_replica=None):
    """Sequences the deployment's engines hold at once: the scenario's `concurrency`, or, where its request stream
    sets the engine's per-replica batch cap (`Traffic.max_num_seqs`), that cap on every replica, so the memory plan,
    the KV pool and the simulated engine agree however many replicas there are."""
    if max_num_seqs_per_replica is None:
        return concurrency
    return max_num_seqs_per_replica * maximum(num_gpus // gpus_per_replica, 1)


def micro_batch(sequences, pipeline_parallel):
    """Sequences per decode step on one stage: a replica's running sequences split over the `pipeline_parallel`
    micro-batches in flight (vLLM virtual engines), the first ones full."""
    if type(sequences) is int and type(pipeline_parallel) is int:  # a simulated step's batch: the common case
        return -(-sequences // pipeline_parallel)
    return ceil_div(sequences, pipeline_parallel)


@dataclass(frozen=True, slots=True)
class ReplicaShape:
    """How the scenario lands on one replica (tensor x pipeline GPUs): the load every term is sized for.

    Concurrency splits over the replicas (the busiest one is planned); pipeline-parallel decode keeps
    every stage busy with `pipeline_parallel` micro-batches in flight (vLLM virtual engines). Tensor
    groups are innermost (consecutive GPUs), so a pipeline hand-off crosses nodes once a replica does;
    an expert-parallel group spans `expert_parallel` GPUs.
    """

    replicas: Number
    sequences: Number  # per replica
    micro_batch: Number  # sequences per decode step on one stage
    stage_layers: Number  # on the most loaded stage
    tensor_link: Link
    pipeline_link: Link
    expert_link: Link

    @classmethod
    def of(cls, arch: ModelArchitecture, inputs: InferenceInputs, hw: HardwareInputs) -> ReplicaShape:
        tp, pp = inputs.tensor_parallel, inputs.pipeline_parallel
        replicas = inputs.num_gpus // (tp * pp)
        sequences = ceil_div(inputs.concurrency, replicas)
        return cls(
            replicas=replicas,
            sequences=sequences,
            micro_batch=micro_batch(sequences, pp),
            stage_layers=mem.stage_layers(arch, pp),
            tensor_link=hardware_link(tp, hw, runtime_profile(inputs.runtime).custom_allreduce, tp),
            pipeline_link=hardware_link(tp * pp, hw),
            expert_link=hardware_link(inputs.expert_parallel, hw, participants=inputs.expert_parallel, all_to_all=True),
        )
