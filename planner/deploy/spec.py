"""The engine-neutral deployment a plan describes: every number a launch command and a benchmark run need,
read once from the scenario and from the plan's own derived figures. The engine modules (`vllm`, `sglang`,
`tensorrt_llm`) only spell it.

Layout: a plan's replica is `tensor_parallel x pipeline_parallel` GPUs. When expert parallelism spans several
replicas (expert_parallel > tensor_parallel), those replicas are data-parallel ranks of one server that share
the experts (vLLM `--data-parallel-size` with `--enable-expert-parallel`, SGLang `--enable-dp-attention`,
TensorRT-LLM `enable_attention_dp`); otherwise every replica is a server of its own.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

from planner.errors import PlanningError
from planner.inference.inputs import engine_concurrency
from planner.inference.results import InferencePlan
from planner.inference.scenario import InferenceScenario
from planner.inference.workload import Traffic
from planner.model.checkpoint_precision import checkpoint_weight_dtypes
from planner.model.hub import catalog_hub_ids
from planner.physics.runtimes import kv_block_tokens, runtime_profile
from planner.physics.schedulers import RELEASES

Engine = Literal["vllm", "sglang", "tensorrt-llm"]
ENGINES: tuple[str, ...] = get_args(Engine)
MODEL_PLACEHOLDER = "MODEL_PATH"
DRAFT_PLACEHOLDER = "DRAFT_MODEL_PATH"
EAGLE_PLACEHOLDER = "EAGLE_HEAD_PATH"  # the plan sizes a generic EAGLE head; the checkpoint is the user's choice
# Prompts a closed-loop benchmark sends per sequence the plan keeps in flight, when the scenario has no stream.
PROMPTS_PER_SEQUENCE = 10
MIN_PROMPTS = 200
MAX_PROMPTS = 100_000
# GPUs one Kubernetes node holds: an HGX/OAM baseboard or an 8-slot server; a GB200/GB300 NVL72 rack's scale-up
# domain is 72 GPUs but each compute tray (one node) holds 4 (NVIDIA GB200 NVL72 spec: 18 trays x 4 GPUs).
SERVER_GPUS = 8
RACK_TRAY_GPUS = 4


class DeployError(PlanningError):
    """A plan that no launch command can be written for, with the reason."""


@dataclass(frozen=True, slots=True)
class Lengths:
    """The benchmark's random dataset: mean prompt and output tokens, uniform within +/- range_ratio."""

    prompt_tokens: int
    output_tokens: int
    range_ratio: float


@dataclass(frozen=True, slots=True)
class Load:
    """How the benchmark client sends: `request_rate` None sends all at once (`inf`); Poisson at burstiness 1."""

    num_prompts: int
    request_rate: float | None
    max_concurrency: int | None
    burstiness: float
    seed: int


@dataclass(frozen=True, slots=True)
class Speculation:
    method: str  # draft_model, eagle or mtp (planner.inference.draft)
    tokens: int  # drafted per sequence and round
    draft: str | None  # the draft model's Hub id or a placeholder (draft_model, eagle); None for mtp
    mtp_modules: int  # the checkpoint's num_nextn_predict_layers


@dataclass(frozen=True, slots=True)
class Adapters:
    """The scenario's LoRA adapters as the plan priced them (`planner.inference.adapters`): how many, the largest
    rank, the projections holding slots (Headroom's names q, k, v, o, gate, up, down), the GPU slots (max_loras,
    the planned runtime's default when the scenario names none) and the host slots (max_cpu_loras), and how the
    requests spread over the adapters (None: evenly)."""

    count: int
    rank: int
    targets: tuple[str, ...]
    gpu_slots: int
    host_slots: int
    popularity: str | None


@dataclass(frozen=True, slots=True)
class DeploymentSpec:
    engine: str
    release: str  # the runtime key of the engine release whose spelling is used (vllm@0.6)
    release_title: str
    model: str  # Hugging Face id, or MODEL_PLACEHOLDER
    model_type: str
    uses_mla: bool
    vendor: str
    gpu_name: str
    tensor_parallel: int
    pipeline_parallel: int
    expert_parallel: int
    data_parallel: int  # replicas that are ranks of one server (1: none)
    servers: int
    gpus_per_server: int
    node_gpus: int
    max_num_seqs: int  # per replica (per data-parallel rank)
    max_num_batched_tokens: int
    chunked_prefill: bool  # as the plan ran it
    memory_fraction: float
    kv_cache_dtype: str
    kv_block_tokens: int
    weight_dtype: str
    checkpoint_dtype: str | None  # what the checkpoint stores (None: unquantized / unknown)
    max_model_len: int | None
    prefix_caching: bool
    honor_sliding_window: bool
    speculation: Speculation | None
    adapters: Adapters | None
    lengths: Lengths
    load: Load
    kv_pool_tokens: int | None  # per replica, from the memory plan
    notes: tuple[str, ...]  # engine-neutral notes

    @property
    def nodes_per_server(self) -> int:
        return -(-self.gpus_per_server // self.node_gpus)

    @property
    def in_engine_expert_parallel(self) -> bool:
        return self.expert_parallel > 1


def engine_of(runtime: str) -> str | None:
    """The deployable engine a runtime key belongs to (`vllm@0.6` -> vllm), None for one without commands."""
    for release in RELEASES:
        if release.runtime == runtime and release.engine in ENGINES:
            return release.engine
    return None


def _release(scenario: InferenceScenario, engine: str | None) -> tuple[str, str, list[str]]:
    planned = engine_of(scenario.runtime)
    if engine is None:
        if planned is None:
            raise DeployError(
                f"the scenario's runtime '{scenario.runtime}' has no deploy command; choose an engine "
                f"({', '.join(ENGINES)})"
            )
        return planned, scenario.runtime, []
    if engine not in ENGINES:
        raise DeployError(f"unknown engine '{engine}'; choose one of {', '.join(ENGINES)}")
    if engine == planned:
        return engine, scenario.runtime, []
    note = (
        f"The plan was sized under {runtime_profile(scenario.runtime).title}, not {runtime_profile(engine).title}: "
        f"the memory share means something else there; re-plan with runtime '{engine}' for numbers that match "
        "these commands."
    )
    return engine, engine, [note]


def hub_model(reference: str | dict) -> str | None:
    """A model's Hugging Face id: a catalog entry's recorded source, or an imported config's `hub_id`; None for
    a size-only model ("dense-70b") or a config without one."""
    if isinstance(reference, dict):
        meta = reference.get("_headroom")
        hub = meta.get("hub_id") if isinstance(meta, dict) else None
        return hub if isinstance(hub, str) and hub else None
    by_catalog = {model_id: hub for hub, model_id in catalog_hub_ids().items()}
    return by_catalog.get(reference)


def node_gpus(scenario: InferenceScenario) -> int:
    accel = scenario.accelerator()
    if accel.vendor in ("apple", "cpu"):
        return 1
    return RACK_TRAY_GPUS if accel.gpus_per_node > SERVER_GPUS else SERVER_GPUS


def _lengths(scenario: InferenceScenario, traffic: Traffic | None) -> tuple[Lengths, int | None, list[str]]:
    """The dataset, the longest request (prompt + output: the engine's max model length) and notes."""
    prompt = scenario.prompt_tokens + scenario.image_tokens_per_request
    output, notes = scenario.output_tokens, []
    kind = traffic.lengths if traffic is not None else "fixed"
    ratio = traffic.range_ratio if traffic is not None and kind == "uniform" else 0.0
    longest: int | None = math.ceil(prompt * (1 + ratio)) + math.ceil(output * (1 + ratio))
    if kind == "lognormal":
        longest = None
        notes.append(
            "The stream's lognormal lengths have no random-dataset form: the benchmark sends the mean lengths "
            "(range ratio 0), and the max model length is left to the model's context."
        )
    elif kind == "trace" and traffic is not None and traffic.trace:
        rows = traffic.trace
        prompt = round(sum(r.prompt_tokens for r in rows) / len(rows))
        output = round(sum(r.output_tokens for r in rows) / len(rows))
        longest = max(r.prompt_tokens + r.output_tokens for r in rows)
        notes.append(
            "The stream is a recorded trace: the benchmark sends its mean lengths; replay the trace itself "
            "(e.g. vLLM's custom dataset) to measure it as planned."
        )
    if scenario.images_per_request:
        notes.append(
            f"Each request carries {scenario.images_per_request} image(s); the random dataset is text only, so the "
            f"benchmark's prompts hold their {scenario.image_tokens_per_request} image tokens as text tokens."
        )
    return Lengths(prompt, output, ratio), longest, notes


def _load(scenario: InferenceScenario, traffic: Traffic | None, servers: int) -> tuple[Load, list[str]]:
    if traffic is None:
        prompts = min(max(PROMPTS_PER_SEQUENCE * scenario.concurrency, MIN_PROMPTS), MAX_PROMPTS)
        return Load(prompts, None, scenario.concurrency, 1.0, 0), [
            f"The scenario has no request stream: the benchmark keeps the plan's {scenario.concurrency} "
            f"sequences in flight (closed loop, --max-concurrency) over {prompts} prompts."
        ]
    notes = []
    burstiness = traffic.burstiness if traffic.arrival == "gamma" else 1.0
    if traffic.arrival == "uniform":
        notes.append("The stream's evenly spaced arrivals have no client setting: the benchmark sends Poisson.")
    if servers > 1 and traffic.stream_rate is not None:
        notes.append(
            f"The request rate is the whole deployment's ({servers} servers): send it to the load balancer in "
            "front of them (the Kubernetes Service), or divide it by the servers to measure one."
        )
    load = Load(traffic.num_requests, traffic.stream_rate, traffic.max_concurrency, burstiness, traffic.seed)
    return load, notes


def _speculation(scenario: InferenceScenario) -> Speculation | None:
    spec = scenario.speculative
    if spec is None:
        return None
    draft = None
    if spec.method == "draft_model":
        draft = hub_model(spec.draft_model or "") or DRAFT_PLACEHOLDER
    elif spec.method == "eagle":
        draft = EAGLE_PLACEHOLDER
    return Speculation(spec.method, spec.num_speculative_tokens, draft, scenario.architecture().mtp_layers)


def _adapters(scenario: InferenceScenario) -> Adapters | None:
    lora = scenario.lora
    if lora is None:
        return None
    shares = lora.shares()
    popularity = None
    if lora.traffic_shares is not None and float(shares.max() - shares.min()) > 1e-12:
        popularity = "the scenario's traffic shares"
    elif lora.traffic_shares is None and lora.zipf_exponent > 0:
        popularity = f"a Zipf law of exponent {lora.zipf_exponent:g}"
    return Adapters(
        count=lora.adapters,
        rank=lora.adapter_rank,
        targets=tuple(lora.target_modules),
        gpu_slots=lora.resident_slots(scenario.runtime),
        host_slots=lora.host_slots(),
        popularity=popularity,
    )


def deployment_spec(plan: InferencePlan, engine: str | None = None) -> DeploymentSpec:
    """The deployment `plan` describes, in engine-neutral numbers, for `engine` (None: the scenario's runtime)."""
    s = plan.scenario
    name, release, notes = _release(s, engine)
    arch, accel = s.architecture(), s.accelerator()
    replica_gpus = s.tensor_parallel * s.pipeline_parallel
    dp = s.expert_parallel // s.tensor_parallel if s.expert_parallel > s.tensor_parallel else 1
    traffic = s.traffic
    requested_chunking = traffic.chunked_prefill if traffic is not None else True
    profile = runtime_profile(release)
    lengths, longest, length_notes = _lengths(s, traffic)
    load, load_notes = _load(s, traffic, s.replicas // dp)
    model = hub_model(s.model)
    if model is None:
        notes.append(
            f"{arch.name} has no Hugging Face id in the catalog: replace {MODEL_PLACEHOLDER} with the checkpoint's "
            "id or path."
        )
    if longest is not None and longest > arch.max_context_tokens:
        notes.append(
            f"The longest request ({longest:,} tokens) exceeds {arch.name}'s context of {arch.max_context_tokens:,}: "
            "the engine refuses a max model length beyond it."
        )
    if requested_chunking and arch.uses_mla and not profile.scheduler.chunked_prefill(True, True):
        notes.append(f"{profile.title} turns chunked prefill off for MLA models, as the plan assumes.")
    if not plan.memory.fits:
        notes.append("The plan does not fit in GPU memory: the engine will refuse to start or run out of KV cache.")
    stored = checkpoint_weight_dtypes(arch)
    sequences = engine_concurrency(s.concurrency, s.num_gpus, replica_gpus, traffic.max_num_seqs if traffic else None)
    blocks = plan.memory.kv_blocks
    block = int(kv_block_tokens(profile, s.kv_block_tokens))
    return DeploymentSpec(
        engine=name,
        release=release,
        release_title=profile.title,
        model=model or MODEL_PLACEHOLDER,
        model_type=arch.model_type,
        uses_mla=arch.uses_mla,
        vendor=accel.vendor,
        gpu_name=accel.name,
        tensor_parallel=s.tensor_parallel,
        pipeline_parallel=s.pipeline_parallel,
        expert_parallel=s.expert_parallel,
        data_parallel=dp,
        servers=s.replicas // dp,
        gpus_per_server=replica_gpus * dp,
        node_gpus=node_gpus(s),
        max_num_seqs=-(-int(sequences) // s.replicas),
        max_num_batched_tokens=s.prefill_chunk_tokens,
        chunked_prefill=profile.scheduler.chunked_prefill(requested_chunking, arch.uses_mla),
        memory_fraction=s.gpu_memory_utilization,
        kv_cache_dtype=s.kv_cache_dtype,
        kv_block_tokens=block,
        weight_dtype=s.weight_dtype,
        checkpoint_dtype=stored[0] if stored else None,
        max_model_len=longest,
        prefix_caching=s.prefix_cache_hit_rate > 0 or (traffic is not None and traffic.shared_prefix_fraction > 0),
        honor_sliding_window=s.honor_sliding_window,
        speculation=_speculation(s),
        adapters=_adapters(s),
        lengths=lengths,
        load=load,
        kv_pool_tokens=blocks * block if blocks else None,
        notes=tuple(notes + length_notes + load_notes),
    )
