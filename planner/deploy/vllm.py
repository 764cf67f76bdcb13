"""vLLM: `vllm serve` and `vllm bench serve` for a deployment spec, in the spelling of the planned release.

Flag names and value spellings checked against vLLM's own parsers (names only; no code taken):
- vllm-project/vllm@99d7eb5d6a51 vllm/engine/arg_utils.py EngineArgs.add_cli_args (the V1 engine, v0.8 on):
  --tensor-parallel-size, --pipeline-parallel-size, --data-parallel-size, --enable-expert-parallel,
  --max-num-seqs, --max-num-batched-tokens, --gpu-memory-utilization, --block-size, --kv-cache-dtype,
  --quantization, --dtype, --max-model-len, --[no-]enable-chunked-prefill and --[no-]enable-prefix-caching
  (BooleanOptionalAction), --disable-sliding-window, --speculative-config (JSON), --distributed-executor-backend.
- vllm-project/vllm@001999d2f360 vllm/engine/arg_utils.py (the V0 engine of v0.6-v0.7): the same names but no
  --data-parallel-size / --enable-expert-parallel; --enable-chunked-prefill takes True/False (StoreBoolean);
  speculative decoding is --speculative-model + --num-speculative-tokens; --kv-cache-dtype auto|fp8|fp8_e5m2|fp8_e4m3.
- vllm/config/cache.py@002f10e0cfa1 CacheDType (auto, fp8, nvfp4, ...); vllm/config/speculative.py@002e77c1f0ef
  SpeculativeMethod / MTPModelTypes (eagle, draft_model, deepseek_mtp, glm4_moe_mtp, qwen3_next_mtp, mtp).
- The client: vllm/benchmarks/serve.py@009e6d4a1cd6 add_cli_args (`vllm bench serve`: --backend, --base-url,
  --model, --request-rate, --burstiness, --max-concurrency, --ignore-eos, --percentile-metrics,
  --metric-percentiles, --save-result, --result-dir, --result-filename) with the random dataset's
  --random-input-len / --random-output-len / --random-range-ratio (a symmetric range [L(1-r), L(1+r)]) and
  benchmarks/benchmark_serving.py@0049e29c41fd (the same flags, the script of v0.8-era checkouts).
- LoRA adapters: the flags, YAML keys and their sources are in planner/deploy/lora.py.
vllm@0.1 (v0.1-0.5) is spelled as vllm@0.6 with `python -m vllm.entrypoints.openai.api_server`; its flags were
not re-read at a v0.5 commit.
"""

from __future__ import annotations

import json

from planner.deploy import lora
from planner.deploy.command import (
    EngineLaunch,
    number,
    result_file,
    shell_command,
    vllm_benchmark_args,
    weight_note,
    weight_source,
)
from planner.deploy.spec import DeploymentSpec

PORT = 8000
IMAGES = {
    "vllm": "vllm/vllm-openai:latest",
    "vllm@0.6": "vllm/vllm-openai:v0.7.3",
    "vllm@0.1": "vllm/vllm-openai:v0.5.5",
}
ROCM_IMAGE = "rocm/vllm:latest"
KV_DTYPES = {"bf16": "auto", "fp16": "auto", "fp32": "auto", "fp8": "fp8", "nvfp4": "nvfp4"}
# vLLM's per-model MTP method names (MTPModelTypes); other MTP checkpoints take the generic "mtp".
MTP_METHODS = {"deepseek_v3": "deepseek_mtp", "deepseek_v2": "deepseek_mtp", "kimi_k2": "deepseek_mtp"}
MTP_METHODS |= {"glm4_moe": "glm4_moe_mtp", "qwen3_next": "qwen3_next_mtp"}


def launch(spec: DeploymentSpec) -> EngineLaunch:
    v1 = spec.release == "vllm"
    notes: list[str] = []
    argv, servers, gpus = _layout(spec, v1, notes)
    argv += [
        "--max-num-seqs",
        str(spec.max_num_seqs),
        "--max-num-batched-tokens",
        str(spec.max_num_batched_tokens),
        "--gpu-memory-utilization",
        number(spec.memory_fraction),
        "--block-size",
        str(spec.kv_block_tokens),
        *_kv_dtype(spec, v1, notes),
        *_weights(spec, notes),
    ]
    if spec.max_model_len is not None:
        argv += ["--max-model-len", str(spec.max_model_len)]
    argv += _switches(spec, notes)
    if not spec.honor_sliding_window:
        argv.append("--disable-sliding-window")
    argv += _speculative(spec, v1, notes)
    argv += _lora(spec, notes)
    if spec.nodes_per_server > 1:
        argv += ["--distributed-executor-backend", "ray"]
    if spec.kv_pool_tokens:
        notes.append(
            f"At start-up vLLM logs its KV cache size: the plan expects {spec.kv_pool_tokens:,} tokens per replica."
        )
    leader = worker = None
    if spec.nodes_per_server > 1:
        leader, worker = _ray_scripts(argv)
        notes.append(
            f"One server spans {spec.nodes_per_server} nodes: vLLM runs it over a Ray cluster (ray start on each "
            "node, vllm serve on the head), as the LeaderWorkerSet does."
        )
    return EngineLaunch(
        serve_argv=tuple(argv),
        benchmark_argv=tuple(_benchmark(spec, v1, notes)),
        image=ROCM_IMAGE if spec.vendor == "amd" else IMAGES[spec.release],
        port=PORT,
        servers=servers,
        gpus_per_server=gpus,
        notes=tuple(notes),
        leader_script=leader,
        worker_script=worker,
        result_file=result_file(spec),
    )


def _layout(spec: DeploymentSpec, v1: bool, notes: list[str]) -> tuple[list[str], int, int]:
    """The launch line's start and its parallelism; the servers and GPUs each holds."""
    if spec.release == "vllm@0.1":
        argv = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", spec.model]
    else:
        argv = ["vllm", "serve", spec.model]
    argv += ["--host", "0.0.0.0", "--port", str(PORT)]
    argv += ["--tensor-parallel-size", str(spec.tensor_parallel), "--pipeline-parallel-size"]
    argv.append(str(spec.pipeline_parallel))
    servers, gpus, ep, tp, dp = spec.servers, spec.gpus_per_server, spec.expert_parallel, spec.tensor_parallel, 1
    if ep > 1 and not v1:
        notes.append(
            f"{spec.release_title} has no expert-parallel setting: its MoE layers split every expert over the "
            f"{tp} tensor-parallel GPUs instead of placing whole experts on {ep} GPUs as planned; expert parallelism "
            "needs vLLM v0.8 or later."
        )
        return argv, servers * spec.data_parallel, tp * spec.pipeline_parallel
    if ep > 1:
        dp = spec.data_parallel
        if dp > 1:
            argv += ["--data-parallel-size", str(dp)]
        if ep == tp * dp:
            argv.append("--enable-expert-parallel")
        else:
            notes.append(
                f"vLLM spreads experts over tensor x data parallel = {tp * dp} GPUs; the planned expert "
                f"parallelism of {ep} has no vLLM form, so the experts stay sharded by tensor parallelism."
            )
    return argv, servers, gpus


def _kv_dtype(spec: DeploymentSpec, v1: bool, notes: list[str]) -> list[str]:
    value = KV_DTYPES.get(spec.kv_cache_dtype)
    if value == "nvfp4" and not v1:
        value = None
    if value is None:
        notes.append(
            f"{spec.release_title} has no {spec.kv_cache_dtype} KV cache: the cache stays in the model's dtype "
            "(--kv-cache-dtype auto), larger than planned."
        )
        value = "auto"
    return ["--kv-cache-dtype", value]


def _weights(spec: DeploymentSpec, notes: list[str]) -> list[str]:
    source = weight_source(spec)
    if source == "online_fp8":
        return ["--quantization", "fp8"]
    if source in ("fp16", "fp32"):
        return ["--dtype", {"fp16": "float16", "fp32": "float32"}[source]]
    note = weight_note(spec, source, "vLLM")
    if note:
        notes.append(note)
    return []


def _switches(spec: DeploymentSpec, notes: list[str]) -> list[str]:
    """Chunked prefill and prefix caching, on or off as planned, in the release's form."""
    if spec.release == "vllm@0.1":  # store_true flags, both off by default
        flags = ["--enable-chunked-prefill"] if spec.chunked_prefill else []
        notes.append("vLLM before v0.4 has neither --enable-chunked-prefill nor --enable-prefix-caching.")
        return flags + (["--enable-prefix-caching"] if spec.prefix_caching else [])
    if spec.release == "vllm@0.6":
        chunked = ["--enable-chunked-prefill", "True" if spec.chunked_prefill else "False"]
    else:
        chunked = ["--enable-chunked-prefill" if spec.chunked_prefill else "--no-enable-chunked-prefill"]
    if not spec.prefix_caching:
        notes.append(
            "The plan counts no prefix-cache hits, so prefix caching is off; turn it on for prompts that share "
            "prefixes (the plan is then conservative)."
        )
    return chunked + ["--enable-prefix-caching" if spec.prefix_caching else "--no-enable-prefix-caching"]


def _speculative(spec: DeploymentSpec, v1: bool, notes: list[str]) -> list[str]:
    sp = spec.speculation
    if sp is None:
        return []
    if spec.release == "vllm@0.1":
        notes.append(f"Speculative decoding ({sp.method}) has no flag in vLLM v0.1-0.3; the plan's speed-up is lost.")
        return []
    if not v1:
        if sp.method == "mtp":
            notes.append(
                "vLLM V0 drafts with MTP modules only from v0.7.3 (--num-speculative-tokens with the target "
                "as --speculative-model); the plan's MTP speed-up needs that release or V1."
            )
            return []
        return ["--speculative-model", str(sp.draft), "--num-speculative-tokens", str(sp.tokens)]
    config: dict = {"num_speculative_tokens": sp.tokens}
    if sp.method == "mtp":
        config = {"method": MTP_METHODS.get(spec.model_type, "mtp"), **config}
        if sp.tokens > sp.mtp_modules:
            notes.append(f"{sp.tokens} drafted tokens from {sp.mtp_modules} MTP module(s): vLLM reuses the module.")
    elif sp.method == "eagle":
        config = {"method": "eagle", "model": sp.draft, **config}
    else:
        config = {"method": "draft_model", "model": sp.draft, **config}
    if sp.draft and sp.draft.endswith("_PATH"):
        notes.append(f"Replace {sp.draft} with the draft checkpoint's Hugging Face id or path.")
    return ["--speculative-config", json.dumps(config, separators=(",", ":"))]


def _lora(spec: DeploymentSpec, notes: list[str]) -> list[str]:
    """The adapters: LoRA on, the plan's GPU slots, host slots (vLLM's default is the GPU slots; the plan's is
    every adapter, so it is always passed) and largest rank, rounded up to a rank vLLM accepts; then the adapters."""
    adapters = spec.adapters
    if adapters is None:
        return []
    ranks = lora.VLLM_RANKS if spec.release == "vllm" else lora.VLLM_V0_RANKS
    rank = lora.round_up_rank(adapters.rank, ranks)
    argv = ["--enable-lora", "--max-loras", str(adapters.gpu_slots), "--max-lora-rank", str(rank)]
    argv += ["--max-cpu-loras", str(lora.cpu_slots(adapters)), "--lora-modules", *lora.name_path_pairs(adapters)]
    if rank != adapters.rank:
        notes.append(
            f"vLLM's --max-lora-rank takes {', '.join(map(str, ranks))}: the plan's rank {adapters.rank} becomes "
            f"{rank}, and every adapter slot is sized at rank {rank}, more memory than the plan counts."
        )
    if spec.release != "vllm":
        since = "; LoRA serving needs v0.3 or later" if spec.release == "vllm@0.1" else ""
        notes.append(
            f"{spec.release_title} checks --max-lora-rank against its own list (trees before mid-2024 stop at 64, "
            f"later V0 trees at 256 or 512; rank 1 came in late 2025){since}."
        )
    notes.append(lora.placeholder_note(adapters, "--lora-modules", "--lora-modules"))
    if note := lora.subset_note(adapters, "vLLM"):
        notes.append(note)
    return argv


def _benchmark(spec: DeploymentSpec, v1: bool, notes: list[str]) -> list[str]:
    if v1:
        argv = ["vllm", "bench", "serve"]
    else:
        argv = ["python", "benchmarks/benchmark_serving.py"]
        notes.append(
            "The benchmark is vLLM's benchmarks/benchmark_serving.py from a v0.8 or later checkout (its random "
            "dataset reads --random-range-ratio as +/- around the mean; earlier scripts read it as a lower bound); "
            "it talks to any OpenAI-compatible server, so a newer client measures this older server."
        )
    argv += vllm_benchmark_args(spec, "vllm", PORT)
    if spec.adapters is not None:  # each request names one of the served adapters as its model
        argv += ["--lora-modules", *lora.names(spec.adapters)]
        if note := lora.uniform_draw_note(spec.adapters, "vLLM's benchmark client (--lora-modules)"):
            notes.append(note)
    return argv


def _ray_scripts(argv: list[str]) -> tuple[str, str]:
    """The leader's and a worker's shell line in a LeaderWorkerSet (LWS_LEADER_ADDRESS is set in every pod)."""
    leader = f"ray start --head --port=6379 && {shell_command(argv)}"
    worker = "ray start --address=$LWS_LEADER_ADDRESS:6379 --block"
    return leader, worker
