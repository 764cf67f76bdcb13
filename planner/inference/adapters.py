"""Many LoRA adapters served on one shared base model (multi-LoRA serving: Punica, arXiv:2310.18547; S-LoRA,
arXiv:2311.03285; vLLM `--enable-lora`): what the adapters cost a replica.

- **Memory**: the engine preallocates `max_loras` GPU slots, each at the largest rank it serves, for every projection
  it wraps (vLLM `LoRAModelManager._create_lora_modules` wraps every supported linear layer whatever an adapter
  targets; `create_lora_weights(max_loras, ...)` sizes the stacked `lora_a` / `lora_b` buffers). The slots are
  created with the model, so they come out of the KV pool.
- **Step time**: each step runs the adapters' shrink (x A) and expand (x B) kernels on every wrapped projection:
  their FLOPs (2 r (d_in + d_out) per token), the A and B of every distinct adapter in the batch read once, and the
  kernels' fixed time.
- **Swaps**: a request whose adapter holds no GPU slot waits for it to be copied in from host memory, and from
  storage first when the host cache (`max_cpu_loras`) does not hold it either. vLLM loads adapters synchronously
  before the forward pass (`vllm/lora/worker_manager.py` `LRUCacheWorkerLoRAManager.set_active_adapters`), so the
  whole step waits.
- **Scheduling**: a batch holds requests of at most `max_loras` distinct adapters; vLLM V1's scheduler skips a
  waiting request whose adapter would exceed that and takes the next (`vllm/v1/core/sched/scheduler.py`). The
  traffic simulation schedules that way (`planner.inference.serving.adapter_slots`).

The static plan prices the expected distinct adapters of a batch and the expected swaps (the LRU hit ratio by Che's
approximation); the traffic simulation draws an adapter for every request and keeps the slots itself.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from planner.arrays import Number
from planner.errors import PlanningError
from planner.inference.serving.adapter_slots import AdapterLimits
from planner.model.architecture import ModelArchitecture
from planner.model.memo import by_identity
from planner.physics.lora import lora_activation_elements_per_token, lora_adapter_elements, lora_wrapped_layers
from planner.results import PlanWarning
from planner.units import gib

LoraTarget = Literal["q", "k", "v", "o", "gate", "up", "down"]
ALL_LINEAR: tuple[LoraTarget, ...] = ("q", "k", "v", "o", "gate", "up", "down")
MAX_ADAPTERS = 100_000

# Where an adapter no host cache holds is read from: one local PCIe 4.0 NVMe drive (the SSD tier of the prefix pool,
# `planner.inference.workload.POOL_TIER_DEFAULTS`, cited there).
ADAPTER_STORAGE_BYTES_PER_SECOND = 6.5e9

# The engine's own defaults for the adapters resident at once / per batch, read from its code:
# vLLM `vllm/config/lora.py` LoRAConfig.max_loras = 1; SGLang `python/sglang/srt/server_args.py`
# max_loras_per_batch = 8; TensorRT-LLM's LLM API `LoraConfig.max_loras` = 4 (`tensorrt_llm/lora_manager.py`).
ENGINE_MAX_LORAS = {"vllm": 1, "sglang": 8, "tensorrt-llm": 4}
# Kernel launches the adapters add per wrapped projection group and forward pass: one shrink and one expand
# (vLLM's punica wrapper `add_lora_linear`: `add_shrink` then `add_expand`, one launch each over all slices).
LORA_KERNELS_PER_GROUP = 2


class LoraAdapters(BaseModel):
    """LoRA adapters on the scenario's model, all served by each replica (every request names one adapter)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    adapters: int = Field(default=8, ge=1, le=MAX_ADAPTERS, description="fine-tuned adapters on the shared base")
    adapter_rank: int = Field(
        default=16, ge=1, le=512, description="the largest adapter rank (vLLM --max-lora-rank): every slot is this size"
    )
    target_modules: tuple[LoraTarget, ...] = Field(
        default=ALL_LINEAR,
        description="projections the engine holds adapter slots for (vLLM wraps every supported one: all linear "
        "layers of attention and the dense MLPs; SGLang --lora-target-modules)",
    )
    max_loras: int | None = Field(
        default=None,
        ge=1,
        le=4096,
        description="adapters resident on the GPU and in one batch at once (vLLM --max-loras, SGLang "
        "--max-loras-per-batch); empty: the engine's default (vLLM 1, SGLang 8, TensorRT-LLM 4), at most the adapters",
    )
    max_cpu_loras: int | None = Field(
        default=None,
        ge=1,
        le=MAX_ADAPTERS,
        description="adapters kept in host memory (vLLM --max-cpu-loras); empty: every adapter (a miss there reads "
        "the adapter from storage)",
    )
    traffic_shares: tuple[float, ...] | None = Field(
        default=None,
        max_length=MAX_ADAPTERS,
        description="share of the requests each adapter receives (one per adapter, normalised); empty: by "
        "zipf_exponent",
    )
    zipf_exponent: float = Field(
        default=0.0,
        ge=0.0,
        le=4.0,
        allow_inf_nan=False,
        description="without traffic_shares, the k-th most popular adapter receives a share proportional to "
        "1 / k^s (0: every adapter alike; S-LoRA's evaluation draws adapters by a power law)",
    )
    storage_bytes_per_second: float | None = Field(
        default=None,
        ge=1e6,
        le=1e13,
        allow_inf_nan=False,
        description="read bandwidth of the storage adapters load from when the host does not hold them; empty: one "
        "local NVMe drive, 6.5 GB/s",
    )

    @field_validator("target_modules")
    @classmethod
    def _some_targets(cls, modules: tuple[str, ...]) -> tuple[str, ...]:
        if not modules:
            raise ValueError("LoRA serving needs at least one target module (q, k, v, o, gate, up, down)")
        return tuple(dict.fromkeys(modules))

    @model_validator(mode="after")
    def _shares_match(self) -> LoraAdapters:
        shares = self.traffic_shares
        if shares is None:
            return self
        if len(shares) != self.adapters:
            raise PlanningError(
                f"traffic_shares lists {len(shares)} shares for {self.adapters} adapters; give one each"
            )
        values = np.asarray(shares, dtype=float)
        if not np.isfinite(values).all() or (values < 0).any() or not values.max() > 0:
            raise PlanningError("traffic_shares must be finite non-negative numbers with a positive sum")
        return self

    def resident_slots(self, runtime: str) -> int:
        """GPU slots (`max_loras`): the scenario's, else the engine's default, never more than the adapters."""
        if self.max_loras is not None:
            return min(self.max_loras, self.adapters)
        family = runtime.split("@")[0].removesuffix("-engine")
        if family not in ENGINE_MAX_LORAS:
            raise PlanningError(
                f"runtime {runtime} has no multi-LoRA serving planned; use vllm, sglang or tensorrt-llm, or set max_loras"
            )
        return min(ENGINE_MAX_LORAS[family], self.adapters)

    def check_host_slots(self, runtime: str) -> None:
        """The engines refuse a host cache smaller than the GPU slots (vLLM: --max-cpu-loras must be at least
        --max-loras; SGLang's --max-loaded-loras likewise holds the batch's adapters)."""
        slots = self.resident_slots(runtime)
        if self.max_cpu_loras is not None and self.max_cpu_loras < slots:
            raise PlanningError(
                f"max_cpu_loras={self.max_cpu_loras} is below the {slots} GPU adapter slots (max_loras); engines "
                "refuse a host cache smaller than the GPU's (vLLM: --max-cpu-loras must be at least --max-loras)"
            )

    def host_slots(self) -> int:
        return self.adapters if self.max_cpu_loras is None else min(self.max_cpu_loras, self.adapters)

    def shares(self) -> np.ndarray:
        """Each adapter's share of the requests, summing to 1, most popular first for a Zipf law."""
        if self.traffic_shares is not None:
            shares = np.asarray(self.traffic_shares, dtype=float)
        else:
            shares = 1.0 / np.arange(1, self.adapters + 1, dtype=float) ** self.zipf_exponent
        shares = shares / shares.max()  # first, so that stated shares near the float limit sum finitely
        return shares / shares.sum()


def check_adapters_fit(arch: ModelArchitecture, runtime: str) -> None:
    """The models and engines multi-LoRA serving is planned for: softmax-attention decoders (no recurrent mixer
    layers, whose projections the layer geometry does not list) on an engine with batched adapters."""
    if arch.layer_pattern and any(
        layer.mixer not in ("full_attention", "sliding_attention", "chunked_attention") for layer in arch.layer_pattern
    ):
        raise PlanningError(
            f"LoRA serving is planned for attention-only decoders; {arch.name} has recurrent or replaced mixer layers"
        )
    family = runtime.split("@")[0].removesuffix("-engine")
    if family in ("hf-transformers", "llama.cpp"):
        raise PlanningError(f"runtime {runtime} does not batch requests of different LoRA adapters; use vllm or sglang")


@dataclass(frozen=True, slots=True)
class AdapterInputs:
    """The adapters as numbers for one replica's GPU (the most loaded pipeline stage)."""

    adapters: int
    slots: int  # GPU slots = distinct adapters one batch may hold
    host_slots: int
    shares: np.ndarray
    # Per-row arrays in a sweep's frame (`frame_adapters`), floats otherwise.
    slot_bytes: Number  # one GPU slot on one GPU: A and B of every wrapped projection of the stage, at the slot rank
    file_bytes: Number  # one adapter's checkpoint, whole model (what storage serves)
    flops_per_token: Number  # one GPU, one stage: shrink and expand of every wrapped projection
    # one GPU, one stage: the activations the kernels move per token (`physics.lora.lora_activation_elements_per_token`)
    activation_bytes_per_token: Number
    kernels_per_layer: Number  # shrink and expand launches per pass through one layer (mean over the stage's layers)
    host_copy_seconds: Number  # one slot filled from host memory (every GPU of the replica in parallel)
    storage_read_seconds: Number  # one adapter read from storage into host memory
    grouped_shares: tuple[np.ndarray, np.ndarray]  # `share_groups(shares)`, once
    gpu_miss_probability: float  # `miss_probabilities`, once
    host_miss_probability: float

    def expected_distinct(self, sequences):
        """Distinct adapters among `sequences` requests drawn independently from the shares, at most the slots:
        sum_i 1 - (1 - p_i)^B. Broadcasts over `sequences` (a float for a scalar)."""
        values, counts = self.grouped_shares
        b = np.asarray(sequences, dtype=float)
        # once per distinct batch size: a sweep's or a table's many rows repeat few of them
        sizes, rows = np.unique(b.reshape(-1), return_inverse=True)
        missed = counts[:, None] * (1.0 - values[:, None]) ** sizes.reshape(1, -1)
        distinct = np.minimum(counts.sum() - missed.sum(axis=0), self.slots)[rows].reshape(b.shape)
        return float(distinct) if distinct.ndim == 0 else distinct

    def miss_probabilities(self) -> tuple[float, float]:
        """(GPU, host) miss probability of a request's adapter: an LRU over `slots` and over `host_slots` adapters
        under independent requests, by Che's approximation (Che, Tung and Wang, IEEE JSAC 20(7), 2002; accurate
        for LRU under the independent reference model: Fricker, Robert and Roberts, ITC 2012)."""
        return self.gpu_miss_probability, self.host_miss_probability

    def expected_load_seconds(self) -> Number:
        """Mean stall a request's adapter adds to the step that admits it: a GPU-slot miss copies it from host
        memory, a host miss reads it from storage first."""
        gpu_miss, host_miss = self.miss_probabilities()
        return gpu_miss * self.host_copy_seconds + host_miss * self.storage_read_seconds


SHARE_GROUPS = 512


def share_groups(shares: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(share, adapters with it): the distinct shares, or beyond `SHARE_GROUPS` of them (a Zipf law over thousands
    of adapters) the mean share of each of that many log-spaced bins, so a sum over adapters costs at most that
    many terms (a bin's adapters differ in share by under 4 % at 100,000 adapters)."""
    values, counts = np.unique(shares[shares > 0], return_counts=True)
    if len(values) <= SHARE_GROUPS:
        return values, counts.astype(float)
    edges = np.geomspace(values[0], values[-1] * (1 + 1e-12), SHARE_GROUPS + 1)
    bins = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, SHARE_GROUPS - 1)
    n = np.bincount(bins, weights=counts, minlength=SHARE_GROUPS)
    mass = np.bincount(bins, weights=values * counts, minlength=SHARE_GROUPS)
    kept = n > 0
    return mass[kept] / n[kept], n[kept]


def lru_miss_probability(shares: np.ndarray, slots: int) -> float:
    """Share of requests whose adapter an LRU cache of `slots` adapters does not hold (Che's approximation: the
    characteristic time T solves sum_i (1 - exp(-p_i T)) = slots; adapter i hits with 1 - exp(-p_i T)), over the
    shares' groups (`share_groups`)."""
    return che_miss_probability(*share_groups(shares), slots)


def che_miss_probability(p: np.ndarray, n: np.ndarray, slots: int) -> float:
    """`lru_miss_probability` over grouped shares: `n[i]` adapters of share `p[i]` each."""
    if slots >= n.sum():
        return 0.0
    # f(T) = sum n_i (1 - exp(-p_i T)) - slots is increasing and concave with f(0) < 0: Newton's steps from T = 0
    # stay below the root and rise to it.
    t = 0.0
    for _ in range(200):
        decay = np.exp(-p * t)
        step = (slots - float(np.dot(n, 1.0 - decay))) / float(np.dot(n, p * decay))
        t += step
        if step <= 1e-12 * t:
            break
    return float(np.dot(n, p * np.exp(-p * t)))


@by_identity
def _popularity(lora: LoraAdapters) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """The adapters' shares and their groups (`share_groups`), once per record: a plan asks for them three times,
    and 100,000 stated shares take milliseconds. Read-only, since every plan of the record shares them."""
    shares = lora.shares()
    grouped = share_groups(shares)
    for array in (shares, *grouped):
        array.setflags(write=False)
    return shares, grouped


def adapter_inputs(
    lora: LoraAdapters,
    arch: ModelArchitecture,
    runtime: str,
    tensor_parallel: int,
    pipeline_parallel: int,
    activation_bytes_per_element: float,
    host_link_bytes_per_second: float,
) -> AdapterInputs:
    """The adapters on one GPU of the replica: slots, bytes, FLOPs and kernels of the wrapped projections (routed
    experts carry none), and the time to fill a slot (the GPU's shard over its host link; every GPU copies its own
    at once) or to read an adapter from storage (its whole checkpoint, in the activation dtype: vLLM's
    `--lora-dtype auto`)."""
    check_adapters_fit(arch, runtime)
    targets = tuple(lora.target_modules)
    rank = lora.adapter_rank
    slot_elements = float(
        lora_adapter_elements(arch, rank, targets, tensor_parallel, pipeline_parallel, 1, experts="skip")
    )
    file_elements = float(lora_adapter_elements(arch, rank, targets, 1, 1, 1, experts="skip"))
    slot_bytes = slot_elements * activation_bytes_per_element
    file_bytes = file_elements * activation_bytes_per_element
    shares, grouped = _popularity(lora)
    slots, host_slots = lora.resident_slots(runtime), lora.host_slots()
    return AdapterInputs(
        adapters=lora.adapters,
        slots=slots,
        host_slots=host_slots,
        shares=shares,
        slot_bytes=slot_bytes,
        file_bytes=file_bytes,
        flops_per_token=2.0 * slot_elements,  # x A then B: 2 FLOPs per adapter element on this GPU
        activation_bytes_per_token=activation_bytes_per_element
        * float(lora_activation_elements_per_token(arch, targets, tensor_parallel, pipeline_parallel)),
        kernels_per_layer=LORA_KERNELS_PER_GROUP * lora_wrapped_layers(arch, targets, pipeline_parallel),
        host_copy_seconds=slot_bytes / host_link_bytes_per_second,
        storage_read_seconds=file_bytes / (lora.storage_bytes_per_second or ADAPTER_STORAGE_BYTES_PER_SECOND),
        grouped_shares=grouped,
        gpu_miss_probability=che_miss_probability(*grouped, slots),
        host_miss_probability=che_miss_probability(*grouped, host_slots),
    )


def frame_adapters(
    lora: LoraAdapters,
    arch: ModelArchitecture,
    runtime: str,
    layout: tuple[np.ndarray, np.ndarray],
    activation_bytes_per_element: Number,
    host_link_bytes_per_second: Number,
) -> AdapterInputs:
    """`adapter_inputs` for a sweep's frame: per-row arrays for the rows' (tensor_parallel, pipeline_parallel)
    `layout`, activation bytes and host links, each distinct layout computed once."""
    tp, pp = (np.asarray(a, dtype=np.int64) for a in layout)
    pairs, rows = np.unique(np.stack([tp, pp], axis=1), axis=0, return_inverse=True)
    rows = rows.reshape(-1)
    # At 1 byte per element and 1 byte/s: bytes in elements, seconds in elements over the link.
    built = [adapter_inputs(lora, arch, runtime, int(t), int(p), 1.0, 1.0) for t, p in pairs]

    def column(name: str) -> np.ndarray:
        return np.array([float(getattr(b, name)) for b in built])[rows]

    slot_bytes = column("slot_bytes") * activation_bytes_per_element
    file_bytes = built[0].file_bytes * activation_bytes_per_element
    return replace(
        built[0],
        slot_bytes=slot_bytes,
        file_bytes=file_bytes,
        flops_per_token=column("flops_per_token"),
        activation_bytes_per_token=column("activation_bytes_per_token") * activation_bytes_per_element,
        kernels_per_layer=column("kernels_per_layer"),
        host_copy_seconds=slot_bytes / host_link_bytes_per_second,
        storage_read_seconds=built[0].storage_read_seconds * activation_bytes_per_element,
    )


def draw_adapter_ids(requests: int, shares: np.ndarray, seed: int) -> np.ndarray:
    """The adapter each of a stream's requests names, drawn independently from the shares (a generator of its own,
    seeded from the stream's seed, so the arrivals and lengths stay those of the stream without adapters)."""
    rng = np.random.default_rng([seed, 0x10A])
    return rng.choice(len(shares), size=requests, p=shares)


def adapter_limits(adapters: AdapterInputs) -> AdapterLimits:
    """What the traffic simulation's replica keeps of its adapters (`serving.adapter_slots`; one scenario's, never
    a sweep frame's)."""
    return AdapterLimits(
        slots=adapters.slots,
        host_slots=adapters.host_slots,
        host_copy_seconds=float(adapters.host_copy_seconds),
        storage_read_seconds=float(adapters.storage_read_seconds),
    )


def adapter_assumptions(lora: LoraAdapters, adapters: AdapterInputs) -> list[str]:
    """The plan's sentences on how it prices the adapters."""
    gpu_miss, host_miss = adapters.miss_probabilities()
    popularity = (
        "by the stated traffic shares"
        if lora.traffic_shares is not None
        else ("evenly" if lora.zipf_exponent == 0 else f"by a Zipf law, exponent {lora.zipf_exponent:g}")
    )
    return [
        f"LoRA: {adapters.adapters:,} adapters of rank {lora.adapter_rank} on the shared base, requests spread "
        f"{popularity}; {adapters.slots} GPU slots (max_loras) of {gib(float(np.mean(adapters.slot_bytes)))} per GPU each, preallocated "
        "for every wrapped projection (routed experts carry none) and taken from the KV pool; "
        f"{adapters.host_slots:,} kept in host memory.",
        "LoRA step cost: shrink and expand kernels on every wrapped projection after the base model's, "
        f"{float(np.mean(adapters.kernels_per_layer)):g} launches per layer at a small GEMM's fixed time each, their "
        "FLOPs at the decode GEMM rate, each distinct adapter of the batch read once (the expected distinct count of "
        "independent draws) and the activations they move (inputs read, outputs read and written) at the HBM rate. "
        "This roofline is a lower bound on the overhead: published same-machine runs lose more throughput, 10-25 % on "
        "2025-26 dense stacks (vLLM v0.25.1 o_proj-only -11 %, PR #48887; SGLang on Ascend -11 to -14 %, PR #15912; "
        "vLLM on TPU -8 to -24 %, PR #15655) and 34-50 % on 2024 ones (vLLM V0, rank 8 on A100, -34 %, PR #11267, "
        "where this model gives -6 %).",
        f"LoRA swaps: {gpu_miss:.0%} of requests find their adapter without a GPU slot and {host_miss:.0%} outside host "
        "memory (LRU by Che's approximation); a load stalls the step that admits it (vLLM loads adapters before the "
        f"forward pass): {adapters.host_copy_seconds * 1e3:.2g} ms over the host link, "
        f"{adapters.storage_read_seconds * 1e3:.2g} ms more from storage. The traffic simulation draws each request's "
        "adapter and keeps the slots itself; its prefix-cache hits count within one adapter (vLLM hashes the adapter "
        "into every prefix block), and a stated prefix-cache hit rate is read as that per-adapter rate.",
    ]


def adapter_summary(lora: LoraAdapters, adapters: AdapterInputs) -> str:
    """The adapters one replica serves, in a clause (the fleet answer's)."""
    return (
        f"{adapters.adapters:,} LoRA adapters (rank {lora.adapter_rank}) on {adapters.slots} GPU slots per replica, "
        f"{gib(float(np.mean(adapters.slot_bytes)) * adapters.slots)} per GPU; the capacity includes their kernels, the loads and the "
        "requests that wait for a slot"
    )


def adapter_warnings(adapters: AdapterInputs, sequences_per_replica: int) -> list[PlanWarning]:
    """A batch that needs more distinct adapters than the slots: the scheduler skips the requests of the rest,
    which wait until an adapter's running requests all finish (they starve while its traffic continues: vLLM's
    scheduler says so, "simple and NOT fair ... can lead to starvation of some LoRAs", vllm-project/vllm PR #9289;
    SGLang's greedy rule has the same edge case, sgl-project/sglang PR #15129)."""
    values, counts = adapters.grouped_shares
    unclipped = float(np.sum(counts * (1 - (1 - values) ** sequences_per_replica)))
    if unclipped <= adapters.slots + 0.5:
        return []
    return [
        PlanWarning(
            "lora_slots_short",
            f"A batch of {sequences_per_replica} requests carries about {unclipped:.0f} distinct adapters but the engine "
            f"holds {adapters.slots} (max_loras): requests of the others wait until an adapter's running requests all "
            f"finish, which under steady traffic can take minutes. Raise max_loras to {int(np.ceil(unclipped))} or more "
            "(each slot costs GPU memory) or route adapters to replicas.",
        )
    ]
