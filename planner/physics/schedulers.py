"""How a serving engine batches, admits and evicts, release by release: the scheduler half of a runtime profile.

`planner.physics.runtimes` holds each release's memory accounting; this module holds what its scheduler does
with the requests (read by the traffic simulation, `planner.inference.serving.scheduler`), and how a runtime
written as `engine@version` resolves to the nearest dated release the planner knows (`resolve_runtime`).

Every field of a `SchedulerPolicy` carries its source in `sources`: an engine's code at a release, its docs or a
maintainers' post. Nothing here is fitted to a measured serving run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Preemption = Literal["recompute", "none"]


@dataclass(frozen=True, slots=True)
class SchedulerPolicy:
    """One release's scheduling rules, as the traffic simulation runs them.

    - `chunked_prefill_for_mla`: False where the release turns chunked prefill off for multi-head latent
      attention models (DeepSeek-V2/V3/R1, Kimi K2), whatever the setting: a step then prefills whole prompts
      and decodes wait for it.
    - `mixes_prefill_with_decode`: True where a step's token budget holds every running decode and then prompt
      chunks (vLLM's chunked prefill); False where a step is either a prefill batch or a decode batch, new
      prompts first (SGLang's default, `--enable-mixed-chunk` off).
    - `preemption`: "recompute" (a sequence that needs a KV block none has frees its blocks and is prefilled
      again later) or "none" (a request is admitted only when the blocks of its whole prompt and output are
      free, so nothing is ever evicted: TensorRT-LLM's GUARANTEED_NO_EVICT capacity scheduler).
    - `admission_watermark`: the share of the KV pool a new request must leave free when it is admitted.
    """

    chunked_prefill_for_mla: bool = True
    mixes_prefill_with_decode: bool = True
    preemption: Preemption = "recompute"
    admission_watermark: float = 0.0
    sources: tuple[str, ...] = ()

    def chunked_prefill(self, requested: bool, uses_mla: bool) -> bool:
        """Whether steps chunk prompts: the setting, unless this release turns chunking off for the model."""
        return requested and (self.chunked_prefill_for_mla or not uses_mla)

    def describe(self) -> str:
        """One sentence for the plan's notes."""
        parts = [
            "prefill chunks share a step with every running decode"
            if self.mixes_prefill_with_decode
            else "a step is a prefill batch or a decode batch, new prompts first (decodes wait)",
            "recompute preemption when KV runs out"
            if self.preemption == "recompute"
            else "a request is admitted only when its whole prompt and output fit the pool (never evicted)",
        ]
        if not self.chunked_prefill_for_mla:
            parts.append("chunked prefill is turned off for MLA models")
        if self.admission_watermark:
            parts.append(f"admission leaves {self.admission_watermark:.0%} of the KV pool free")
        return "; ".join(parts)


VLLM_V1 = SchedulerPolicy(
    sources=(
        "vllm-project/vllm vllm/v1/core/sched/scheduler.py Scheduler.schedule (v0.8-v0.12): the running requests "
        "(decodes, unfinished prompts) are scheduled first within max_num_batched_tokens, the waiting ones after, "
        "and none 'if not preempted_reqs'; preempt_request frees the victim's blocks (recompute); chunked prefill "
        "always on",
    ),
)
VLLM_V0 = SchedulerPolicy(
    chunked_prefill_for_mla=False,
    admission_watermark=0.01,
    sources=(
        "vllm-project/vllm PR #12642 (merged 2025-02-01, v0.7.1) vllm/config.py VllmConfig.__post_init__: 'MLA is "
        "enabled; forcing chunked prefill and prefix caching to be disabled.' (V0 engine, v0.7.1-v0.7.3 on every "
        "platform; PR #12639's MLA chunked prefill narrowed it to non-CUDA platforms from about v0.7.4)",
        "vllm v0.6-v0.7 vllm/core/block_manager.py SelfAttnBlockSpaceManager.can_allocate: "
        "num_free_gpu_blocks - num_required_blocks >= watermark_blocks, watermark 0.01 x num_gpu_blocks "
        "(EngineArgs / CacheConfig default)",
        "vllm v0.6-v0.7 vllm/core/scheduler.py: PreemptionMode.RECOMPUTE for single-sequence groups",
    ),
)
VLLM_PAPER = SchedulerPolicy(
    admission_watermark=0.01,
    sources=(
        "vllm-project/vllm v0.1.x vllm/core/block_manager.py BlockSpaceManager.can_allocate: watermark 0.01 of the "
        "GPU blocks; vllm/core/scheduler.py: whole-prompt prefill steps, recompute preemption (no chunked prefill)",
    ),
)
SGLANG = SchedulerPolicy(
    mixes_prefill_with_decode=False,
    sources=(
        "sgl-project/sglang python/sglang/srt/managers/scheduler.py get_next_batch_to_run: a new prefill batch "
        "(chunked by chunked_prefill_size) runs before the running decode batch; server_args.py "
        "enable_mixed_chunk defaults to False",
        "python/sglang/srt/managers/schedule_batch.py ScheduleBatch.retract_decode: when decode runs out of KV, "
        "requests are retracted and later recomputed",
    ),
)
TENSORRT_LLM = SchedulerPolicy(
    preemption="none",
    sources=(
        "NVIDIA/TensorRT-LLM docs (features/kv-cache / llm-api SchedulerConfig): CapacitySchedulerPolicy "
        "GUARANTEED_NO_EVICT is the default: a request is scheduled only if the KV blocks for its whole "
        "generation can be guaranteed, so running requests are never paused; MAX_UTILIZATION may pause them",
    ),
)
SINGLE_BATCH = SchedulerPolicy(
    sources=("no scheduler: generate() / llama-server slots run the batch they are given; read as vLLM V1's rules",)
)


@dataclass(frozen=True, slots=True)
class Release:
    """A dated engine release the planner has a profile for: `runtime` is its key in `runtimes.RUNTIMES`."""

    runtime: str
    engine: str
    first_version: tuple[int, ...]


# The releases each engine name resolves among: `engine@version` picks the latest whose first version is at or
# before it. A bare engine name is the engine's latest profile (its entry in RUNTIMES under that name).
RELEASES: tuple[Release, ...] = (
    Release("vllm@0.1", "vllm", (0, 1)),
    Release("vllm@0.6", "vllm", (0, 6)),
    Release("vllm", "vllm", (0, 8)),
    Release("sglang", "sglang", (0, 4)),
    Release("tensorrt-llm-engine", "tensorrt-llm", (0, 5)),
    Release("tensorrt-llm", "tensorrt-llm", (0, 20)),
)
# Names old links and scripts used: they keep opening (`resolve_runtime`), as the profile they always meant.
RENAMED_RUNTIMES = {"vllm-v0": "vllm@0.1"}

_VERSION = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(?:[.\-+].*)?$")


def resolve_runtime(text: object) -> object:
    """A runtime as written (`vllm`, `vllm@0.7.3`, `sglang@0.5.6`, `tensorrt-llm@1.0`, an old name) as the key
    of the profile it selects. Anything else is returned unchanged, for the field's own validation to refuse."""
    if not isinstance(text, str):
        return text
    name = text.strip()
    name = RENAMED_RUNTIMES.get(name, name)
    engine, at, version = name.partition("@")
    if not at:
        return name
    releases = [r for r in RELEASES if r.engine == engine]
    match = _VERSION.match(version.strip())
    if not releases:
        raise ValueError(f"no versioned profiles for engine '{engine}' (versions exist for: {', '.join(_engines())})")
    if match is None:
        raise ValueError(f"'{version}' is not a version number (write {engine}@0.7.3)")
    wanted = tuple(int(part) for part in match.groups() if part is not None)
    if name in {r.runtime for r in releases}:
        return name  # a profile's own key (vllm@0.6)
    earlier = [r for r in releases if r.first_version <= wanted]
    if not earlier:
        first = ".".join(map(str, min(r.first_version for r in releases)))
        raise ValueError(f"{engine} {version} is older than any profile the planner has (the first is {first})")
    return max(earlier, key=lambda r: r.first_version).runtime


def _engines() -> list[str]:
    return sorted({r.engine for r in RELEASES})
