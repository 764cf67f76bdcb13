"""What the training formulas read: the scenario's numbers and the cluster's, as small frozen records.

`training_inputs(scenario)` and `training_hardware(scenario, accelerator)` build them from a validated
`TrainingScenario`. Every numeric field holds a Python number for `plan()` or a numpy array of one shape
for `planner.search.sweep` (DESIGN rule 4); the sweep replaces fields with `dataclasses.replace`.
Categorical choices that pick a formula (optimizer, LoRA targets) stay scalars.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from planner.arrays import Flag, Number
from planner.calibration_record import CalibrationRecord, device_terms_for
from planner.hardware.catalog import Accelerator
from planner.physics import attention_efficiency, fp8_casts, gemm_efficiency, grouped_gemm_training
from planner.physics.energy import accelerator_power
from planner.training.activations import loss_bytes_per_logit
from planner.training.precision import PRECISIONS, PrecisionBytes
from planner.training.recompute import RECOMPUTE_LEVEL, Recompute
from planner.training.scenario import TrainingScenario


@dataclass(frozen=True, slots=True)
class TrainingHardware:
    """Accelerator and cluster numbers the formulas use, per GPU (arrays when sweeping several GPU types)."""

    memory_capacity_bytes: Number
    bandwidth_bytes_per_second: Number
    peak_flops_per_second: Number  # dense, in the precision recipe's compute dtype
    intra_node_bytes_per_second: Number
    intra_node_latency_seconds: Number
    inter_node_bytes_per_second: Number
    host_link_bytes_per_second: Number
    gpus_per_node: Number
    is_accelerator: Flag
    usd_per_gpu_hour: Number
    # The layer GEMMs' peak: the FP8 dense peak with an FP8 recipe on a GPU that has it, else the peak above.
    gemm_peak_flops_per_second: Number
    # GEMM ceiling (MAMF / peak) relative to the GPU the training efficiency is stated for (A100 SXM BF16), and the
    # fixed time per GEMM kernel (planner.physics.gemm_efficiency).
    gemm_ceiling_ratio: Number = 1.0
    gemm_tail_seconds: Number = 0.0
    # The layer GEMMs' format's MAMF share of its peak over the 16-bit one's (H100: FP8 70.9 % / BF16 80.3 %): what an
    # FP8 recipe's GEMMs reach of the FP8 peak beside what 16-bit GEMMs reach of theirs; 1 for every other recipe.
    gemm_format_ceiling_ratio: Number = 1.0
    # Power per GPU (planner.physics.energy.accelerator_power): the board's and an idle device's, in watts.
    board_watts: Number = 0.0
    idle_watts: Number = 0.0
    # The named fused-attention kernel's rate on this GPU, share of the 16-bit peak in the planner's FLOP count
    # (planner.physics.attention_efficiency); 0: none stated or published, attention runs like the GEMMs.
    attention_efficiency: Number = 0.0
    # MXFP8 recipe on a GPU whose tensor cores take its block scales: the FP8 MAMF the routed experts' grouped GEMMs
    # are priced on (planner.physics.grouped_gemm_training); 0: they stay in the flat-efficiency compute.
    mxfp8_grouped_gemm_flops_per_second: Number = 0.0
    # A 16-bit recipe: the rate its routed experts' grouped GEMMs run at (`BF16_GROUPED_GEMM_OF_MAMF` x the BF16 MAMF,
    # planner.physics.grouped_gemm_training); 0: they stay in the flat-efficiency compute (FP8, fp32, no GPU).
    bf16_grouped_gemm_flops_per_second: Number = 0.0

    @classmethod
    def from_accelerator(
        cls,
        accel: Accelerator,
        compute_dtype: str,
        usd_per_gpu_hour: float,
        gpus_per_node: int,
        inter_node_bytes_per_second: float,
        gemm_dtype: str | None = None,
        calibration: CalibrationRecord | None = None,
    ) -> TrainingHardware:
        """The catalog's numbers; a calibration that measured this GPU (`CalibrationRecord.device_terms_apply`)
        replaces the intra-node link's per-step latency and the GEMM ceiling and kernel time with its fitted ones."""
        ceiling_dtype = accel.gemm_dtype(compute_dtype)
        latency, fitted = device_terms_for(calibration, accel.id, ceiling_dtype)
        power = accelerator_power(accel)
        return cls(
            memory_capacity_bytes=float(accel.memory_bytes),
            bandwidth_bytes_per_second=accel.memory_bandwidth_bytes_per_second,
            peak_flops_per_second=accel.peak_flops(compute_dtype),
            intra_node_bytes_per_second=accel.interconnect_bandwidth_bytes_per_second,
            intra_node_latency_seconds=accel.interconnect_latency_seconds if latency is None else latency,
            inter_node_bytes_per_second=inter_node_bytes_per_second,
            host_link_bytes_per_second=accel.host_link_bandwidth_bytes_per_second,
            gpus_per_node=gpus_per_node,
            is_accelerator=accel.vendor != "cpu",
            usd_per_gpu_hour=usd_per_gpu_hour,
            gemm_peak_flops_per_second=accel.peak_flops(gemm_dtype or compute_dtype),
            gemm_ceiling_ratio=gemm_efficiency.training_ceiling_ratio(
                accel.id, ceiling_dtype, fitted.ceiling if fitted is not None else None
            ),
            gemm_format_ceiling_ratio=gemm_efficiency.gemm_ceiling(
                accel.id, accel.gemm_dtype(gemm_dtype or compute_dtype)
            )
            / gemm_efficiency.gemm_ceiling(accel.id, ceiling_dtype),
            gemm_tail_seconds=gemm_efficiency.gemm_tail_seconds(
                accel.vendor not in ("cpu", "apple"), fitted.tail_seconds if fitted is not None else None
            ),
            board_watts=power.board_watts,
            idle_watts=power.idle_watts,
        )


@dataclass(frozen=True, slots=True)
class SiteInputs:
    """The site's energy figures (planner.physics.energy): PUE, and the price and carbon of a kWh."""

    pue: Number = 1.0
    electricity_usd_per_kwh: Number = 0.0
    carbon_kg_per_kwh: Number = 0.0


@dataclass(frozen=True, slots=True)
class LoraInputs:
    rank: int
    target_modules: tuple[str, ...]
    quantize_base: bool
    double_quantization: bool


@dataclass(frozen=True, slots=True)
class LayoutInputs:
    """Parallel degrees (Megatron-core rank order TP x CP x DP x PP; EP carved out of DP)."""

    tensor_parallel: Number
    pipeline_parallel: Number
    data_parallel: Number
    context_parallel: Number
    expert_parallel: Number
    virtual_stages: Number
    sequence_parallel: Flag  # in effect: only with tensor_parallel > 1
    num_gpus: Number
    # Uneven stages (Megatron --decoder-first/last-pipeline-num-layers); None: Megatron's even split.
    first_stage_layers: Number | None = None
    last_stage_layers: Number | None = None
    # Derived once here (and again by every dataclasses.replace, which calls __init__), never passed in:
    dense_group: Number = field(init=False)  # GPUs that share one dense parameter shard and split its ZeRO states
    expert_group: Number = field(init=False)  # GPUs that share one routed-expert shard: DP x CP / EP

    def __post_init__(self) -> None:
        object.__setattr__(self, "dense_group", self.data_parallel * self.context_parallel)
        object.__setattr__(self, "expert_group", self.data_parallel * self.context_parallel / self.expert_parallel)


@dataclass(frozen=True, slots=True)
class BatchInputs:
    """Sequences per micro-batch and per optimizer step, their length, and the whole job's tokens."""

    micro_batch_size: Number
    global_batch_size: Number
    sequence_length: Number
    training_tokens: Number


@dataclass(frozen=True, slots=True)
class RecipeInputs:
    """Memory savers and their timing side: sharding, offload, recomputation, kernels, overlap."""

    optimizer: str
    zero_stage: Number  # effective: Megatron's distributed optimizer counts as 1
    offload_optimizer: Flag
    offload_parameters: Flag
    recompute: Recompute | Number  # a level, or an array of levels when sweeping
    flash_attention: Flag
    dropout: Flag
    grad_accumulation_fp32: Flag
    overlap_grad_reduce: Flag
    # Megatron-core's DDP: the gradients live in one buffer of the reduce dtype (fp32 with grad_reduce_in_fp32),
    # `param.main_grad` views into it, and no 16-bit copy is kept (see `gradient_bytes_per_element`).
    megatron_gradient_buffer: Flag = False
    loss_bytes_per_logit: Number = 12.0  # the cross-entropy's peak per vocabulary entry (`loss_bytes_per_logit`)
    overlap_tp_backward: Flag = False  # the backward's TP collectives under the weight-gradient GEMMs (Megatron-core)
    tp_comm_overlap: Flag = False  # every TP collective chunked and pipelined with its GEMM (TE userbuffers, async TP)
    # Which modules selective recomputation recomputes (Megatron-core names); Megatron's default is core_attn.
    recompute_modules: tuple[str, ...] = ("core_attn",)
    recompute_method: str = "uniform"  # full recomputation: uniform groups or a block of layers per stage
    recompute_num_layers: int = 1
    # MoE: routed tokens of the busiest expert-parallel rank over the mean (1: balanced)
    expert_load_imbalance: Number = 1.0
    zero_bubble: Flag = False  # ZB-H1: weight gradients deferred into the pipeline bubble
    node_deduplicated_dispatch: Flag = False  # DeepEP: one RDMA copy of a token per remote node
    overlap_expert_all_to_all: Flag = False  # dispatch/combine under another micro-batch's compute
    fp8_cast_bytes_per_element: Number = 0.0  # HBM bytes an FP8 recipe's casts move per GEMM operand element; 0: none


@dataclass(frozen=True, slots=True)
class TrainingInputs:
    """Everything scenario-side one training plan reads, grouped; `runtime_overhead_correction_bytes` comes
    from a calibration (0 without one)."""

    layout: LayoutInputs
    batch: BatchInputs
    recipe: RecipeInputs
    precision: PrecisionBytes
    lora: LoraInputs | None
    runtime_overhead_correction_bytes: Number = 0.0
    site: SiteInputs = SiteInputs()
    # Derived in __post_init__ (see LayoutInputs):
    microbatches: Number = field(init=False)  # per data-parallel replica per step (gradient accumulation steps)
    tokens_per_microbatch: Number = field(init=False)  # on one GPU: context parallelism splits every sequence

    def __post_init__(self) -> None:
        batch, layout = self.batch, self.layout
        microbatches = batch.global_batch_size / (batch.micro_batch_size * layout.data_parallel)
        object.__setattr__(self, "microbatches", microbatches)
        tokens = batch.micro_batch_size * batch.sequence_length / layout.context_parallel
        object.__setattr__(self, "tokens_per_microbatch", tokens)

    @property
    def lora_rank(self) -> int:
        return self.lora.rank if self.lora else 0

    @property
    def lora_targets(self) -> tuple[str, ...]:
        return self.lora.target_modules if self.lora else ()


def training_inputs(scenario: TrainingScenario, runtime_overhead_correction_bytes: Number = 0.0) -> TrainingInputs:
    """The numbers and flags of one validated scenario."""
    lora = None
    if scenario.lora is not None:
        lora = LoraInputs(
            scenario.lora.rank,
            tuple(scenario.lora.target_modules),
            scenario.lora.quantize_base,
            scenario.lora.double_quantization,
        )
    return TrainingInputs(
        layout=LayoutInputs(
            tensor_parallel=scenario.tensor_parallel,
            pipeline_parallel=scenario.pipeline_parallel,
            data_parallel=scenario.dp,
            context_parallel=scenario.context_parallel,
            expert_parallel=scenario.expert_parallel,
            virtual_stages=scenario.virtual_pipeline_stages,
            sequence_parallel=scenario.sequence_parallel and scenario.tensor_parallel > 1,
            num_gpus=scenario.num_gpus,
            first_stage_layers=scenario.first_pipeline_stage_layers,
            last_stage_layers=scenario.last_pipeline_stage_layers,
        ),
        batch=BatchInputs(
            micro_batch_size=scenario.micro_batch_size,
            global_batch_size=scenario.global_batch_size,
            sequence_length=scenario.sequence_length,
            training_tokens=scenario.training_tokens,
        ),
        recipe=RecipeInputs(
            optimizer=scenario.optimizer,
            zero_stage=scenario.effective_zero_stage,
            offload_optimizer=scenario.offload_optimizer,
            offload_parameters=scenario.offload_parameters,
            recompute=RECOMPUTE_LEVEL[scenario.activation_checkpointing],
            flash_attention=scenario.flash_attention,
            dropout=scenario.dropout,
            grad_accumulation_fp32=scenario.grad_accumulation_fp32,
            overlap_grad_reduce=scenario.overlap_grad_reduce,
            megatron_gradient_buffer=scenario.distributed_optimizer,
            loss_bytes_per_logit=loss_bytes_per_logit(scenario.loss_kernel, PRECISIONS[scenario.precision].activation),
            overlap_tp_backward=scenario.overlap_tp_backward,
            tp_comm_overlap=scenario.tp_comm_overlap,
            recompute_modules=tuple(m for m in scenario.recompute_modules.split(",") if m),
            recompute_method=scenario.recompute_method,
            recompute_num_layers=scenario.recompute_num_layers,
            expert_load_imbalance=scenario.expert_load_imbalance,
            zero_bubble=scenario.pipeline_schedule == "zb-h1",
            node_deduplicated_dispatch=scenario.expert_dispatch == "deepep",
            overlap_expert_all_to_all=scenario.overlap_expert_all_to_all,
            fp8_cast_bytes_per_element=(
                fp8_casts.cast_bytes_per_element(scenario.fp8_recipe) if scenario.precision == "fp8" else 0.0
            ),
        ),
        precision=PRECISIONS[scenario.precision],
        lora=lora,
        runtime_overhead_correction_bytes=runtime_overhead_correction_bytes,
        site=SiteInputs(scenario.pue, scenario.electricity_usd_per_kwh, scenario.carbon_kg_per_kwh),
    )


def training_hardware(
    scenario: TrainingScenario, accel: Accelerator, calibration: CalibrationRecord | None = None
) -> TrainingHardware:
    """The accelerator's numbers in the scenario's compute dtype, its price (or the reference price), and
    the cluster's node size and network; `calibration`'s fitted device terms where it measured this GPU."""
    price = scenario.usd_per_gpu_hour if scenario.usd_per_gpu_hour is not None else accel.reference_usd_per_hour
    precision = PRECISIONS[scenario.precision]
    hardware = TrainingHardware.from_accelerator(
        accel,
        precision.compute_dtype,
        price,
        scenario.gpus_per_node_on(accel),
        scenario.inter_node_bandwidth_bytes_per_second,
        precision.gemm_dtype,
        calibration,
    )
    return replace(
        hardware,
        attention_efficiency=attention_efficiency.planner_attention_efficiency(accel.id, scenario.attention_kernel),
        mxfp8_grouped_gemm_flops_per_second=mxfp8_grouped_gemm_flops(scenario, accel),
        bf16_grouped_gemm_flops_per_second=bf16_grouped_gemm_flops(scenario, accel),
    )


def bf16_grouped_gemm_flops(scenario: TrainingScenario, accel: Accelerator) -> float:
    """The rate a 16-bit recipe's routed-expert grouped GEMMs run at on a GPU: `BF16_GROUPED_GEMM_OF_MAMF` of its
    16-bit MAMF (`gemm_efficiency.gemm_ceiling` x the peak); 0 for FP8 and fp32 recipes and off GPUs."""
    compute = PRECISIONS[scenario.precision]
    if (
        compute.gemm_dtype is not None
        or compute.compute_dtype not in ("bf16", "fp16")
        or accel.vendor in ("cpu", "apple")
    ):
        return 0.0
    dtype = accel.gemm_dtype(compute.compute_dtype)
    ceiling = gemm_efficiency.gemm_ceiling(accel.id, dtype) * accel.peak_flops(compute.compute_dtype)
    return grouped_gemm_training.BF16_GROUPED_GEMM_OF_MAMF * ceiling


def mxfp8_grouped_gemm_flops(scenario: TrainingScenario, accel: Accelerator) -> float:
    """The FP8 MAMF (`gemm_efficiency.gemm_ceiling` x the FP8 peak) an MXFP8 recipe's routed-expert grouped GEMMs run
    on; 0 for every other recipe (the scenario refuses MXFP8 on a GPU whose tensor cores do not take its 1 x 32
    block scales)."""
    if scenario.precision != "fp8" or scenario.fp8_recipe != "mxfp8":
        return 0.0
    return gemm_efficiency.gemm_ceiling(accel.id, "fp8") * accel.peak_flops("fp8")
