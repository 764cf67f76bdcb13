"""The inference scenario: serving one model on a cluster, validated at the edge."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from planner.dtypes import DType, KVDType
from planner.errors import PlanningError
from planner.inference.adapters import LoraAdapters, check_adapters_fit
from planner.inference.draft import SpeculativeDecoding, draft_architecture
from planner.inference.workload import Traffic
from planner.model.architecture import ModelArchitecture
from planner.model.catalog import resolve_model
from planner.model.checkpoint_precision import checkpoint_weight_dtypes
from planner.physics.runtimes import DEFAULT_RUNTIME, RuntimeName
from planner.physics.schedulers import resolve_runtime
from planner.scenario_base import MAX_TOKENS, ScenarioBase


class InferenceScenario(ScenarioBase):
    """Serving one model: `concurrency` sequences of `prompt_tokens` in and `output_tokens` out."""

    kind: Literal["inference"] = "inference"
    expert_parallel: int = Field(
        default=1,
        ge=1,
        le=65_536,
        description="expert parallelism (mixture-of-experts models only): the experts are spread over this many GPUs",
    )
    weight_dtype: DType = Field(
        default="bf16",
        description="storage format of the linear-layer weights; fp8, int8 and nvfp4/mxfp4 run their GEMMs in "
        "that format where the GPU has tensor cores for it (fp4: Blackwell) and are dequantized to bf16 elsewhere; "
        "int4 is weight-only (GPTQ/AWQ) and computes in bf16",
    )
    attention_weight_dtype: DType | None = Field(
        default=None,
        description="storage format of the attention projections when it differs from weight_dtype (FP8 checkpoints "
        "that keep attention in BF16, gpt-oss's MXFP4 experts beside BF16 attention); empty: weight_dtype. Both "
        "default to what the checkpoint's quantization_config declares",
    )
    fp8_scaling: Literal["tensor", "block"] | None = Field(
        default=None,
        description="how FP8 weights carry their scales: one per tensor or channel, or one per 128 x 128 block "
        "(DeepSeek-V3-style checkpoints; on Hopper their GEMMs reach about 0.68 of the BF16 rate); empty: the "
        "checkpoint's quantization_config (blocks where it gives weight_block_size), else per tensor",
    )
    kv_cache_dtype: KVDType = Field(
        default="bf16",
        description="storage format of the cached keys and values (formats serving engines cache in; nvfp4: "
        "TensorRT-LLM on Blackwell)",
    )
    weight_group_size: int = Field(
        default=128, ge=16, le=4096, description="int4 quantization group: one fp16 scale and a 4-bit zero per group"
    )
    quantize_embeddings: bool = Field(default=False, description="also quantize embedding and lm_head")
    prompt_tokens: int = Field(default=2048, ge=1, le=MAX_TOKENS, description="tokens in each request's prompt")
    images_per_request: int = Field(
        default=0,
        ge=0,
        le=64,
        description="images in each request's prompt (multimodal models): each runs through the vision encoder "
        "and adds its tokens to the prompt",
    )
    tokens_per_image: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="prompt tokens one image becomes; empty: the model's (Gemma 3: 256; Llama 4: 144 per tile; "
        "Pixtral: its largest image, fewer for smaller ones)",
    )
    output_tokens: int = Field(default=512, ge=1, le=MAX_TOKENS, description="tokens generated per request")
    concurrency: int = Field(default=64, ge=1, le=MAX_TOKENS, description="sequences in flight, whole deployment")
    kv_block_tokens: int = Field(
        default=16,
        ge=1,
        le=4096,
        description="paged-attention block size; every sequence's KV cache is rounded up to whole blocks",
    )
    gpu_memory_utilization: float = Field(
        default=0.90, gt=0.05, le=1.0, description="engine's share of GPU memory (vLLM gpu_memory_utilization)"
    )
    runtime: Annotated[RuntimeName, BeforeValidator(resolve_runtime)] = Field(
        default=DEFAULT_RUNTIME,
        description="serving engine and release whose memory accounting sizes the KV pool, whose scheduler the "
        "traffic simulation runs and whose fixed costs each step pays; 'engine@version' (vllm@0.7.3, "
        "sglang@0.5.6, tensorrt-llm@1.0) selects the latest profile at or before that version, a bare name the "
        "latest: vllm (V1, v0.8 on: the budget holds weights, the profiling run's activations and sampler, and "
        "the NCCL / all-reduce buffers that grow with TP), vllm@0.6 (the V0 engine of v0.6-v0.7: V1's memory rule, "
        "a 1% admission watermark, chunked prefill off for MLA models), vllm@0.1 (v0.1-0.5, the PagedAttention "
        "paper's engine, formerly 'vllm-v0': only the torch peak counts), sglang (gpu_memory_utilization read as "
        "mem_fraction_static: a static pool of weights and KV; prefill and decode in separate steps), tensorrt-llm "
        "(read as free_gpu_memory_fraction of what the profiling peak leaves; its overlap scheduler hides per-step "
        "CPU work; no-evict admission), tensorrt-llm-engine (the same budget in the v0.x TensorRT-engine releases, "
        "without the overlap scheduler), hf-transformers (generate(): no paging, the whole prompt's activations, "
        "no fraction) or llama.cpp (the whole context's KV and compute buffers allocated up front, no fraction)",
    )
    prefill_chunk_tokens: int = Field(default=8192, ge=16, le=MAX_TOKENS, description="max tokens per prefill step")
    honor_sliding_window: bool = Field(
        default=True, description="sliding-window layers cache at most their window (as engines that support it do)"
    )
    prefix_cache_hit_rate: float = Field(
        default=0.0, ge=0.0, le=1.0, description="share of prompt tokens already cached"
    )
    target_requests_per_second: float | None = Field(
        default=None, gt=0, le=1e7, description="request rate to serve; the plan then says how many GPUs it needs"
    )
    traffic: Traffic | None = Field(
        default=None,
        description="a request stream to simulate (rate, lengths, SLO targets); absent: the static plan only. "
        "With traffic, the engine's batch cap per replica is traffic.max_num_seqs, or when empty this concurrency "
        "over the replicas",
    )

    speculative: SpeculativeDecoding | None = Field(
        default=None,
        description="speculative decoding: a draft (separate model, EAGLE-style head or the checkpoint's MTP "
        "modules) proposes tokens the model verifies in one step; absent: plain decoding",
    )

    lora: LoraAdapters | None = Field(
        default=None,
        description="LoRA adapters served on the shared base (every request names one): their GPU slots, "
        "kernels and swaps; absent: the base model alone",
    )

    @model_validator(mode="before")
    @classmethod
    def _checkpoint_precision(cls, data: Any) -> Any:
        """A scenario that names no weight format serves the checkpoint as stored: its quantization_config's
        format for the quantized groups (DeepSeek-R1: fp8; gpt-oss: MXFP4 experts, BF16 attention)."""
        if not isinstance(data, dict) or "weight_dtype" in data:
            return data
        try:
            arch = resolve_model(data.get("model", ScenarioBase.model_fields["model"].default))
        except (PlanningError, ValueError, TypeError):
            return data  # the field validators say what is wrong with the model
        stored = checkpoint_weight_dtypes(arch)
        if stored is None:
            return data
        weights, attention = stored
        filled = {**data, "weight_dtype": weights}
        if attention and "attention_weight_dtype" not in data:  # a format the user gave for attention is kept
            filled["attention_weight_dtype"] = attention
        return filled

    @model_validator(mode="after")
    def _valid_layout(self) -> InferenceScenario:
        arch = self.architecture()
        self.accelerator()
        self._check_tensor_parallel(arch)
        self._check_pipeline(arch)
        per_replica = self.tensor_parallel * self.pipeline_parallel
        if self.num_gpus % per_replica:
            raise PlanningError(
                f"num_gpus={self.num_gpus} is not a multiple of tensor_parallel x pipeline_parallel = {per_replica}; "
                f"use {per_replica * max(1, self.num_gpus // per_replica)} GPUs or change the layout"
            )
        ep = self.expert_parallel
        if ep > 1:
            if not arch.is_moe:
                raise PlanningError(f"expert_parallel={ep} needs a mixture-of-experts model; {arch.name} is dense")
            if arch.num_experts % ep:
                raise PlanningError(f"expert_parallel={ep} does not divide the model's {arch.num_experts} experts")
            gpus_per_stage = self.num_gpus // self.pipeline_parallel
            tp = self.tensor_parallel
            if not (tp % ep == 0 or (ep % tp == 0 and gpus_per_stage % ep == 0)):
                raise PlanningError(
                    f"expert_parallel={ep} must divide tensor_parallel={tp}, or be a multiple of it that divides the "
                    f"{gpus_per_stage} GPUs of a pipeline stage across replicas"
                )
        if self.speculative is not None:
            self._check_speculative(arch, self.speculative)
        if self.lora is not None:
            check_adapters_fit(arch, self.runtime)
            self.lora.check_host_slots(self.runtime)
        if self.images_per_request and not arch.vision_tokens_per_image:
            raise PlanningError(
                f"images_per_request={self.images_per_request} needs a multimodal model; {arch.name} has no vision "
                "encoder the planner counts"
            )
        return self

    @property
    def image_tokens_per_request(self) -> int:
        """Prompt tokens the request's images add (0 without images)."""
        if not self.images_per_request:
            return 0
        return self.images_per_request * (self.tokens_per_image or self.architecture().vision_tokens_per_image)

    def _check_speculative(self, arch: ModelArchitecture, spec: SpeculativeDecoding) -> None:
        if self.pipeline_parallel > 1:
            raise PlanningError(
                "speculative decoding is planned without pipeline parallelism only (the draft and its verify step "
                "would cross stages every round); use pipeline_parallel=1"
            )
        draft = draft_architecture(arch, spec)
        if spec.method == "draft_model":
            try:
                self._check_tensor_parallel(draft)
            except PlanningError as exc:
                raise PlanningError(f"the draft model {draft.name}: {exc}") from None

    @property
    def replicas(self) -> int:
        return self.num_gpus // (self.tensor_parallel * self.pipeline_parallel)

    @property
    def context_tokens(self) -> int:
        return self.prompt_tokens + self.image_tokens_per_request + self.output_tokens
