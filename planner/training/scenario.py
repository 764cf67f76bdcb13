"""TrainingScenario: one training or fine-tuning job on one cluster, validated at the edge.

Layout convention (Megatron-core rank order, innermost first): tensor (TP) x context (CP) x data (DP)
x pipeline (PP) = num_gpus. Expert parallelism (EP) is carved out of the data-parallel ranks, as in
Megatron-core and DeepSpeed-MoE: EP must divide DP, and routed experts are sharded over TP x EP.
`global_batch_size` and `micro_batch_size` count sequences of `sequence_length` tokens; gradient
accumulation steps = global / (micro x DP).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from planner.errors import PlanningError
from planner.hardware.catalog import Accelerator
from planner.physics.attention_efficiency import AttentionKernel
from planner.physics.grouped_gemm_training import MXFP8_ACCELERATORS
from planner.scenario_base import MAX_TOKENS, ModelRef, ScenarioBase
from planner.training.memory import uneven_stage_layers

Precision = Literal["mixed_bf16", "mixed_fp16", "amp_bf16", "bf16", "fp32", "fp8"]
Optimizer = Literal["adamw", "adam8bit", "sgd", "sgd_momentum", "adafactor"]
Checkpointing = Literal["none", "selective", "op", "full"]
RecomputeMethod = Literal["uniform", "block"]
Fp8Recipe = Literal["delayed", "current", "mxfp8"]

# Megatron-core's `--recompute-modules` (TransformerConfig.recompute_modules, megatron/core/transformer/
# transformer_config.py): the modules selective recomputation may checkpoint, in this canonical order.
RECOMPUTE_MODULES: tuple[str, ...] = (
    "core_attn",
    "layernorm",
    "mlp",
    "moe",
    "moe_act",
    "shared_experts",
    "mla_up_proj",
)
LoraModule = Literal["q", "k", "v", "o", "gate", "up", "down"]

ALL_LINEAR: tuple[str, ...] = ("q", "k", "v", "o", "gate", "up", "down")


class LoraConfig(BaseModel):
    """Low-rank adapters (Hu et al. 2021) on the chosen projections; QLoRA (Dettmers et al. 2023)
    additionally stores the frozen base linear layers in 4-bit NormalFloat."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rank: int = Field(default=16, ge=1, le=4096)
    target_modules: tuple[LoraModule, ...] = Field(
        default=ALL_LINEAR, description="projections that get adapters (q, k, v, o, gate, up, down)"
    )
    quantize_base: bool = Field(default=False, description="QLoRA: frozen base linear layers in 4-bit NF4")
    double_quantization: bool = Field(default=True, description="QLoRA: quantize the NF4 block scales too")

    @field_validator("target_modules")
    @classmethod
    def _non_empty(cls, modules: tuple[str, ...]) -> tuple[str, ...]:
        if not modules:
            raise ValueError("LoRA needs at least one target module (q, k, v, o, gate, up, down)")
        return tuple(dict.fromkeys(modules))


class TrainingScenario(ScenarioBase):
    """Training (pre-training or full fine-tuning) or LoRA/QLoRA fine-tuning of one model."""

    kind: Literal["training"] = "training"
    model: ModelRef = "llama-3.1-8b"
    num_gpus: int = Field(
        default=8, ge=1, le=100_000, description="GPUs in the job: tensor x pipeline x context x data parallel"
    )
    tensor_parallel: int = Field(
        default=1,
        ge=1,
        le=1024,
        description="tensor parallelism: every layer is split over this many GPUs; must divide the attention heads",
    )
    data_parallel: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="data-parallel replicas; None (empty): num_gpus / (tensor x pipeline x context parallel)",
    )
    context_parallel: int = Field(
        default=1,
        ge=1,
        le=1024,
        description="context parallelism (ring attention): each sequence is split over this many GPUs",
    )
    expert_parallel: int = Field(
        default=1, ge=1, le=65_536, description="expert parallelism (MoE), carved out of the data-parallel ranks"
    )
    sequence_parallel: bool = Field(default=True, description="Megatron sequence parallelism (with TP > 1)")
    virtual_pipeline_stages: int = Field(default=1, ge=1, le=128, description="> 1: interleaved 1F1B schedule")
    pipeline_schedule: Literal["1f1b", "zb-h1"] = Field(
        default="1f1b",
        description="1f1b (interleaved with virtual_pipeline_stages > 1), or zb-h1: zero-bubble ZB-H1 (Qi et al., "
        "ICLR 2024; ZB1P in DeepSeek-V3's Table 2), weight gradients deferred into the bubble: (p - 1)(F + B - 2W) "
        "idle per step at 1F1B's peak activation memory",
    )
    # An int with bounds rather than Literal[0..3]: links and CSV cells carry it as text ("2"), which
    # pydantic converts to an int but never matches against int literals.
    zero_stage: int = Field(
        default=1,
        ge=0,
        le=3,
        description="ZeRO stage (0 = DDP, 1 = optimizer, 2 = + gradients, 3 = + parameters / FSDP)",
    )
    distributed_optimizer: bool = Field(default=False, description="Megatron's distributed optimizer (ZeRO-1 sharding)")
    offload_optimizer: bool = Field(default=False, description="optimizer state and step on the CPU (ZeRO-Offload)")
    offload_parameters: bool = Field(default=False, description="parameter shards in host RAM (ZeRO-Infinity/FSDP)")
    optimizer: Optimizer = Field(
        default="adamw",
        description="adamw keeps two fp32 moments per parameter, adam8bit two 8-bit ones, sgd none "
        "(sgd_momentum one), adafactor factored second moments",
    )
    precision: Precision = Field(
        default="mixed_bf16",
        description="mixed_bf16: bf16 weights and gradients with fp32 master weights and optimizer state (Megatron, "
        "DeepSpeed); amp_bf16: fp32 weights with bf16 autocast (PyTorch AMP); bf16: pure bf16",
    )
    grad_accumulation_fp32: bool = Field(
        default=False,
        description="keep an fp32 gradient accumulation buffer next to 16-bit gradients (DeepSpeed); with "
        "distributed_optimizer, Megatron's grad_reduce_in_fp32: its fp32 grad buffer is the gradients",
    )
    micro_batch_size: int = Field(
        default=1,
        ge=1,
        le=MAX_TOKENS,
        description="sequences per forward and backward pass on each data-parallel replica",
    )
    global_batch_size: int = Field(
        default=64,
        ge=1,
        le=MAX_TOKENS,
        description="sequences per optimizer step over the whole job (micro-batch x data parallel x accumulation steps)",
    )
    sequence_length: int = Field(default=4096, ge=1, le=MAX_TOKENS, description="tokens per training sequence")
    activation_checkpointing: Checkpointing = Field(
        default="none",
        description="recompute activations in the backward pass: selective recomputes the recompute_modules "
        "(Megatron-core), op saves every other matmul output and recomputes the rest (torchtitan op-level SAC), "
        "full recomputes whole layers (recompute_method / recompute_num_layers)",
    )
    recompute_modules: str = Field(
        default="core_attn",
        max_length=200,
        description="modules selective recomputation recomputes, comma-separated (Megatron-core --recompute-modules): "
        "core_attn, layernorm, mlp, moe, moe_act, shared_experts, mla_up_proj",
        json_schema_extra={"choices": list(RECOMPUTE_MODULES)},  # what a widget offers; `_known_modules` checks
    )
    recompute_method: RecomputeMethod = Field(
        default="uniform",
        description="full recomputation: uniform checkpoints every group of recompute_num_layers layers; block "
        "recomputes only the first recompute_num_layers layers of each stage and keeps the rest (Megatron-core)",
    )
    recompute_num_layers: int = Field(
        default=1,
        ge=1,
        le=1024,
        description="full recomputation: layers per checkpointed group (uniform) or recomputed layers per pipeline "
        "stage (block)",
    )
    first_pipeline_stage_layers: int | None = Field(
        default=None,
        ge=0,
        le=10_000,
        description="layers on the first pipeline stage (Megatron --decoder-first-pipeline-num-layers); empty: an "
        "even split; the other stages share the rest evenly",
    )
    last_pipeline_stage_layers: int | None = Field(
        default=None,
        ge=0,
        le=10_000,
        description="layers on the last pipeline stage (Megatron --decoder-last-pipeline-num-layers), which also holds "
        "the output head and loss; empty: an even split",
    )
    fp8_recipe: Fp8Recipe = Field(
        default="delayed",
        description="precision fp8 (Transformer Engine, hybrid E4M3 forward / E5M2 gradients): delayed scaling from "
        "an amax history, current (per-tensor, just-in-time) scaling, or mxfp8 (E4M3 with a power-of-two scale per "
        "1x32 block; Blackwell only)",
    )
    flash_attention: bool = Field(default=True, description="fused attention that never stores the score matrix")
    attention_kernel: AttentionKernel = Field(
        default="unstated",
        description="the fused attention kernel: fa2 (FlashAttention-2; PyTorch SDPA's default on Hopper before "
        "torch 2.11), fa3 (FlashAttention-3), cudnn (cuDNN fused attention); unstated: priced like the GEMMs at the "
        "flat training efficiency. Published rates on Hopper only (planner.physics.attention_efficiency)",
    )
    loss_kernel: Literal["unfused", "te"] = Field(
        default="unfused",
        description="cross-entropy: unfused (PyTorch on fp32 logits, HF Trainer and torchtitan: 12 B x vocabulary / "
        "TP per token) or te (Transformer Engine parallel_cross_entropy, Megatron's cross_entropy_fusion_impl te: "
        "keeps the 16-bit logits and writes their gradient in place)",
    )
    dropout: bool = Field(default=False, description="hidden/attention dropout (GPT-3/Megatron); modern LLMs use none")
    training_tokens: float = Field(
        default=1e9, gt=0, le=1e16, description="total tokens to train on: sets the time and cost to train"
    )
    overlap_grad_reduce: bool = Field(
        default=True, description="reduce gradients during the last backward (DDP buckets, --overlap-grad-reduce)"
    )
    overlap_tp_backward: bool = Field(
        default=False,
        description="the backward's tensor-parallel collectives run under the weight-gradient GEMMs (Megatron-core's "
        "asynchronous input-gradient all-reduce / reduce-scatter, on by default there; torchtitan and plain PyTorch "
        "TP do not)",
    )
    tp_comm_overlap: bool = Field(
        default=False,
        description="every tensor-parallel all-gather and reduce-scatter, forward and backward, split into TP chunks "
        "pipelined with its GEMM's (Transformer Engine userbuffers, Megatron --tp-comm-overlap; torchtitan's async "
        "TP): one chunk of each stays exposed",
    )
    expert_dispatch: Literal["nccl", "deepep"] = Field(
        default="nccl",
        description="MoE dispatch/combine: nccl (an all-to-all: each routed copy of a token crosses to its expert's "
        "GPU) or deepep (DeepSeek's DeepEP: a token crosses to each remote node once over RDMA and is forwarded "
        "inside it over NVLink; Megatron-core's flex dispatcher)",
    )
    overlap_expert_all_to_all: bool = Field(
        default=False,
        description="MoE dispatch/combine of one micro-batch under another's compute (Megatron-core "
        "moe_a2a_overlap; DeepSeek-V3's DualPipe overlaps them the same way)",
    )
    expert_load_imbalance: float = Field(
        default=1.0,
        ge=1.0,
        le=16.0,
        description="MoE: routed tokens of the busiest expert-parallel rank over the mean (1: balanced routing, as in "
        "benchmarks that force-balance the router; aux-loss or capacity-free routing early in training runs above "
        "it). An assumption the plan states: the step waits for the busiest rank's experts and all-to-all",
    )
    gpus_per_node: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="GPUs that share the NVLink domain; empty: the GPU's own scale-up domain (8 on an HGX "
        "baseboard, 72 in a GB200/GB300 NVL72 rack)",
    )
    inter_node_bandwidth_bytes_per_second: float = Field(
        default=50e9, gt=0, le=1e13, description="network bandwidth per GPU between nodes, one direction"
    )
    lora: LoraConfig | None = None

    @field_validator("recompute_modules")
    @classmethod
    def _known_modules(cls, text: str) -> str:
        names = [n.strip() for n in text.replace(";", ",").replace(" ", ",").split(",") if n.strip()]
        unknown = [n for n in names if n not in RECOMPUTE_MODULES]
        if unknown:
            raise ValueError(
                f"unknown recompute module(s) {', '.join(unknown)}; choose from {', '.join(RECOMPUTE_MODULES)}"
            )
        return ",".join(m for m in RECOMPUTE_MODULES if m in names)

    @property
    def recompute_module_set(self) -> tuple[str, ...]:
        """The selective-recomputation modules as a tuple (canonical order); empty unless selective."""
        if self.activation_checkpointing != "selective":
            return ()
        return tuple(m for m in self.recompute_modules.split(",") if m)

    def stage_layer_counts(self) -> tuple[int, int, int] | None:
        """(first, middle, last) stage layers with uneven stages; None for Megatron's even split."""
        counts = uneven_stage_layers(
            self.architecture().num_layers,
            self.pipeline_parallel,
            self.first_pipeline_stage_layers,
            self.last_pipeline_stage_layers,
        )
        # Whole layers: validation has checked that the rest splits evenly over the stages not named.
        return None if counts is None else (int(counts[0]), int(counts[1]), int(counts[2]))

    @model_validator(mode="after")
    def _valid_layout(self) -> TrainingScenario:
        arch = self.architecture()
        accel = self.accelerator()
        self._check_tensor_parallel(arch)
        self._check_pipeline(arch)
        tp, pp, cp, ep = self.tensor_parallel, self.pipeline_parallel, self.context_parallel, self.expert_parallel
        model_parallel = tp * pp * cp
        if self.data_parallel is None:
            if self.num_gpus % model_parallel:
                raise PlanningError(
                    f"num_gpus={self.num_gpus} is not a multiple of tensor_parallel x pipeline_parallel x "
                    f"context_parallel = {tp} x {pp} x {cp} = {model_parallel}"
                )
        elif model_parallel * self.data_parallel != self.num_gpus:
            raise PlanningError(
                f"tensor_parallel x pipeline_parallel x context_parallel x data_parallel = {tp} x {pp} x {cp} x "
                f"{self.data_parallel} = {model_parallel * self.data_parallel} GPUs, but num_gpus is {self.num_gpus}"
            )
        dp = self.dp
        per_step = self.micro_batch_size * dp
        if self.global_batch_size % per_step:
            lower = max(per_step, self.global_batch_size // per_step * per_step)
            raise PlanningError(
                f"global_batch_size={self.global_batch_size} is not a multiple of micro_batch_size x data_parallel = "
                f"{self.micro_batch_size} x {dp} = {per_step}: gradient accumulation needs whole micro-batches "
                f"(use {lower} or {lower + per_step})"
            )
        if self.attention_kernel != "unstated" and not self.flash_attention:
            raise PlanningError(
                f"attention_kernel={self.attention_kernel} names a fused attention kernel, but flash_attention is off "
                "(set attention_kernel to unstated, or turn flash_attention on)"
            )
        if cp > 1:
            if not self.flash_attention:
                raise PlanningError("context_parallel > 1 needs flash_attention (ring attention is built on it)")
            if self.sequence_length % (2 * cp):
                raise PlanningError(
                    f"sequence_length={self.sequence_length} must be a multiple of 2 x context_parallel = {2 * cp} "
                    "(load-balanced causal context parallelism splits each sequence into 2 x CP chunks)"
                )
        if ep > 1:
            if not arch.is_moe:
                raise PlanningError(f"expert_parallel={ep} needs a mixture-of-experts model; {arch.name} is dense")
            if arch.num_experts % ep:
                raise PlanningError(f"expert_parallel={ep} does not divide the model's {arch.num_experts} experts")
            if dp % ep:
                raise PlanningError(
                    f"expert_parallel={ep} must divide data_parallel={dp}: expert-parallel ranks are carved out of "
                    "the data-parallel ranks"
                )
        v = self.virtual_pipeline_stages
        if self.pipeline_schedule == "zb-h1" and (pp == 1 or v > 1):
            raise PlanningError(
                "pipeline_schedule=zb-h1 needs pipeline_parallel > 1 and virtual_pipeline_stages = 1 (the published "
                f"ZB-H1 bubble is for the plain schedule; this plan has pipeline_parallel={pp}, "
                f"virtual_pipeline_stages={v})"
            )
        if v > 1:
            if pp == 1:
                raise PlanningError("virtual_pipeline_stages > 1 (interleaved schedule) needs pipeline_parallel > 1")
            uneven = self.first_pipeline_stage_layers is not None or self.last_pipeline_stage_layers is not None
            if arch.num_layers % (pp * v) and not uneven:
                raise PlanningError(
                    f"the interleaved schedule needs the {arch.num_layers} layers to split evenly into "
                    f"pipeline_parallel x virtual_pipeline_stages = {pp} x {v} = {pp * v} chunks, or uneven first/"
                    "last stages (first_pipeline_stage_layers / last_pipeline_stage_layers: e.g. Llama 3's "
                    "embedding-only first and loss-only last chunks)"
                )
            if self.gradient_accumulation_steps % pp:
                raise PlanningError(
                    f"the interleaved schedule needs the number of micro-batches ({self.gradient_accumulation_steps}) "
                    f"to be a multiple of pipeline_parallel={pp}"
                )
        if self.distributed_optimizer and self.zero_stage >= 2:
            raise PlanningError(
                "Megatron's distributed optimizer shards optimizer state only (ZeRO-1); combine it with zero_stage 0 "
                "or 1, or use zero_stage 2/3 without it"
            )
        if self.offload_parameters and self.zero_stage != 3:
            raise PlanningError("offload_parameters needs zero_stage 3 (parameters must be sharded to be offloaded)")
        if self.offload_optimizer and self.effective_zero_stage == 0:
            raise PlanningError("offload_optimizer needs zero_stage >= 1 or distributed_optimizer (ZeRO-Offload)")
        if self.lora is not None and self.lora.quantize_base and self.precision == "fp32":
            raise PlanningError("QLoRA computes in 16 bits; use precision mixed_bf16, amp_bf16 or bf16 with it")
        self._check_recompute(arch)
        self._check_uneven_stages(arch)
        if self.precision == "fp8" and self.lora is not None:
            raise PlanningError(
                "precision fp8 plans Transformer Engine full training; LoRA adapters on a frozen base are planned in "
                "16 bits (mixed_bf16, amp_bf16 or bf16)"
            )
        if self.fp8_recipe != "delayed" and self.precision != "fp8":
            raise PlanningError(f"fp8_recipe={self.fp8_recipe} needs precision fp8 (Transformer Engine)")
        if self.fp8_recipe == "mxfp8" and accel.id not in MXFP8_ACCELERATORS:
            raise PlanningError(
                f"fp8_recipe=mxfp8 needs a Blackwell GPU ({', '.join(MXFP8_ACCELERATORS)}): MXFP8's 1x32 block "
                f"scales are applied by SM100 tensor cores, which {accel.id} does not have; use fp8_recipe current "
                "or delayed"
            )
        return self

    def _check_recompute(self, arch) -> None:
        mode = self.activation_checkpointing
        modules = tuple(m for m in self.recompute_modules.split(",") if m)
        if mode != "selective" and self.recompute_modules != "core_attn":
            raise PlanningError(
                f"recompute_modules={self.recompute_modules} needs activation_checkpointing selective (it is {mode})"
            )
        if mode == "selective" and not modules:
            raise PlanningError(
                "selective recomputation needs at least one recompute module (core_attn, layernorm, mlp, moe, "
                "moe_act, shared_experts, mla_up_proj)"
            )
        if mode != "full" and (self.recompute_method != "uniform" or self.recompute_num_layers != 1):
            raise PlanningError(
                f"recompute_method / recompute_num_layers choose which layers full recomputation recomputes; "
                f"activation_checkpointing is {mode}, not full"
            )
        largest_stage = max(self.stage_layer_counts() or (-(-arch.num_layers // self.pipeline_parallel),))
        if mode == "full" and self.recompute_num_layers > largest_stage:
            raise PlanningError(
                f"recompute_num_layers={self.recompute_num_layers} is more than the {largest_stage} layers of the "
                f"largest pipeline stage; use at most {largest_stage}"
            )
        if "mlp" in modules and arch.num_dense_layers == 0:
            raise PlanningError(
                f"recompute module mlp recomputes dense MLP layers and {arch.name} has none; use moe (or moe_act)"
            )
        for name in ("moe", "moe_act"):
            if name in modules and not arch.is_moe:
                raise PlanningError(f"recompute module {name} needs a mixture-of-experts model; {arch.name} is dense")
        if "shared_experts" in modules and not arch.shared_expert_intermediate_size:
            raise PlanningError(f"recompute module shared_experts needs shared experts; {arch.name} has none")
        if "mla_up_proj" in modules and not arch.uses_mla:
            raise PlanningError(
                f"recompute module mla_up_proj recomputes multi-latent attention's up-projections; {arch.name} "
                "does not use MLA"
            )
        if mode == "op" and arch.uses_mla:
            raise PlanningError(
                "op-level recomputation (torchtitan) is planned for standard attention; for multi-latent attention "
                "use selective with recompute_modules mla_up_proj (Megatron-core)"
            )
        if mode == "op" and not self.flash_attention:
            raise PlanningError(
                "op-level recomputation saves the fused attention kernel's output (torchtitan's save list names the "
                "SDPA kernels); turn flash_attention on"
            )
        if mode == "op" and self.lora is not None:
            raise PlanningError("op-level recomputation is planned for full training, not LoRA; use full or none")

    def _check_uneven_stages(self, arch) -> None:
        first, last = self.first_pipeline_stage_layers, self.last_pipeline_stage_layers
        if first is None and last is None:
            return
        pp, layers = self.pipeline_parallel, arch.num_layers
        if pp == 1:
            raise PlanningError("first_pipeline_stage_layers / last_pipeline_stage_layers need pipeline_parallel > 1")
        given = (first is not None) + (last is not None)
        rest = layers - (first or 0) - (last or 0)
        others = pp - given
        named = " + ".join(
            f"{label} {value}" for label, value in (("first", first), ("last", last)) if value is not None
        )
        if rest < 0:
            raise PlanningError(f"{named} stage layers exceed the model's {layers} layers")
        if others == 0:
            if rest:
                raise PlanningError(
                    f"with {pp} stages, {named} layers must add up to the model's {layers} layers (they give "
                    f"{layers - rest})"
                )
            return
        if rest % others or rest == 0:
            raise PlanningError(
                f"the {rest} layers left after {named} do not split evenly over the other {others} pipeline "
                f"stage{'s' if others > 1 else ''} (Megatron needs an even split of the rest)"
            )

    def gpus_per_node_on(self, accel: Accelerator) -> int:
        """GPUs per node the collectives see: the scenario's figure, else `accel`'s scale-up domain."""
        return self.gpus_per_node if self.gpus_per_node is not None else accel.gpus_per_node

    @property
    def dp(self) -> int:
        """Data-parallel degree (given or derived from the GPU count)."""
        if self.data_parallel is not None:
            return self.data_parallel
        return self.num_gpus // (self.tensor_parallel * self.pipeline_parallel * self.context_parallel)

    @property
    def gradient_accumulation_steps(self) -> int:
        """Micro-batches each data-parallel replica runs per optimizer step."""
        return self.global_batch_size // (self.micro_batch_size * self.dp)

    @property
    def effective_zero_stage(self) -> int:
        """ZeRO stage the memory follows: Megatron's distributed optimizer shards like ZeRO-1."""
        return max(self.zero_stage, 1 if self.distributed_optimizer else 0)

    @property
    def tokens_per_step(self) -> int:
        return self.global_batch_size * self.sequence_length
