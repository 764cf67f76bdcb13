"""TensorRT-LLM: `trtllm-serve` (with an --extra_llm_api_options YAML for what it has no flag for) and the
engine's own serving client for a deployment spec.

Names checked against TensorRT-LLM's own sources (names only; no code taken):
- NVIDIA/TensorRT-LLM@4c05a74891e4 tensorrt_llm/commands/serve.py `serve` (click options): MODEL, --host,
  --port, --backend pytorch|tensorrt, --max_batch_size, --max_num_tokens, --max_seq_len, --tp_size, --pp_size,
  --ep_size, --kv_cache_free_gpu_memory_fraction, --enable_chunked_prefill (a flag, off by default),
  --extra_llm_api_options (a YAML file whose keys override the LLM arguments, kv_cache_config included).
- tensorrt_llm/llmapi/llm_args.py (the trees holding KvCacheConfig(StrictBaseModel, PybindMirror)):
  kv_cache_config.{free_gpu_memory_fraction, enable_block_reuse, dtype}, enable_attention_dp, dtype,
  speculative_config with decoding_type MTP (num_nextn_predict_layers), Eagle and Draft_Target (max_draft_len,
  speculative_model_dir, accepted as an alias of speculative_model in later trees).
- LoRA adapters: the flags, YAML keys and their sources are in planner/deploy/lora.py.
- The client: NVIDIA/TensorRT-LLM@f61d71d9fe7b tensorrt_llm/serve/scripts/benchmark_serving.py (the engine's port
  of vLLM's benchmark_serving: --backend openai, --base-url, --model, --dataset-name random, --random-ids,
  --random-input-len, --random-output-len, --random-range-ratio, --num-prompts, --request-rate, --burstiness,
  --max-concurrency, --ignore-eos, --save-result, --result-filename). It is the client shipped in the engine's
  container and writes vLLM's result JSON, so one reader serves both (genai-perf would need a second one).
"""

from __future__ import annotations

from planner.deploy import lora
from planner.deploy.command import (
    CONFIG_DIR,
    EngineLaunch,
    number,
    result_file,
    vllm_benchmark_args,
    weight_note,
    weight_source,
)
from planner.deploy.spec import DeploymentSpec
from planner.deploy.yaml_text import document

PORT = 8000
IMAGE = "nvcr.io/nvidia/tensorrt-llm/release:latest"
OPTIONS_FILE = "extra_llm_api_options.yaml"
KV_DTYPES = {"bf16": "auto", "fp16": "auto", "fp32": "auto", "fp8": "fp8", "nvfp4": "nvfp4"}


def launch(spec: DeploymentSpec) -> EngineLaunch:
    notes: list[str] = []
    dp = spec.data_parallel
    backend = "tensorrt" if spec.release == "tensorrt-llm-engine" else "pytorch"
    argv = ["trtllm-serve", spec.model, "--host", "0.0.0.0", "--port", str(PORT), "--backend", backend]
    argv += ["--tp_size", str(spec.tensor_parallel * dp), "--pp_size", str(spec.pipeline_parallel)]
    if spec.expert_parallel > 1:
        argv += ["--ep_size", str(spec.expert_parallel)]
    argv += ["--max_batch_size", str(spec.max_num_seqs), "--max_num_tokens", str(spec.max_num_batched_tokens)]
    if spec.max_model_len is not None:
        argv += ["--max_seq_len", str(spec.max_model_len)]
    argv += ["--kv_cache_free_gpu_memory_fraction", number(spec.memory_fraction)]
    if spec.chunked_prefill:
        argv.append("--enable_chunked_prefill")
    argv += ["--extra_llm_api_options", f"{CONFIG_DIR}/{OPTIONS_FILE}"]
    options = _options(spec, notes)
    if lora_config := _lora(spec, backend, notes):
        options["lora_config"] = lora_config
    notes += _notes(spec, backend)
    return EngineLaunch(
        serve_argv=tuple(argv),
        benchmark_argv=tuple(_benchmark(spec)),
        image=IMAGE,
        port=PORT,
        servers=spec.servers,
        gpus_per_server=spec.gpus_per_server,
        notes=tuple(notes),
        files=((OPTIONS_FILE, document(options)),),
        result_file=result_file(spec),
    )


def _options(spec: DeploymentSpec, notes: list[str]) -> dict:
    """The --extra_llm_api_options YAML: its kv_cache_config replaces the CLI's, so it repeats the fraction."""
    kv: dict = {"free_gpu_memory_fraction": spec.memory_fraction, "enable_block_reuse": spec.prefix_caching}
    dtype = KV_DTYPES.get(spec.kv_cache_dtype)
    if dtype is None:
        notes.append(
            f"TensorRT-LLM's PyTorch backend has no {spec.kv_cache_dtype} KV cache: it stays in the model's dtype."
        )
    elif dtype != "auto":
        kv["dtype"] = dtype
    options: dict = {"kv_cache_config": kv}
    if spec.data_parallel > 1:
        options["enable_attention_dp"] = True
    source = weight_source(spec)
    if source in ("fp16", "fp32"):
        options["dtype"] = {"fp16": "float16", "fp32": "float32"}[source]
    elif source == "online_fp8":
        notes.append(
            "TensorRT-LLM serves FP8 from an FP8 checkpoint (TensorRT Model Optimizer, e.g. the nvidia/*-FP8 "
            f"repositories): quantize {spec.model} or use such a copy."
        )
    elif note := weight_note(spec, source, "TensorRT-LLM"):
        notes.append(note)
    speculative = _speculative(spec, notes)
    if speculative:
        options["speculative_config"] = speculative
    return options


def _speculative(spec: DeploymentSpec, notes: list[str]) -> dict | None:
    sp = spec.speculation
    if sp is None:
        return None
    if sp.method == "mtp":
        return {"decoding_type": "MTP", "num_nextn_predict_layers": sp.tokens}
    kind = "Eagle" if sp.method == "eagle" else "Draft_Target"
    if kind == "Draft_Target":
        notes.append("Releases before the Draft_Target spelling name the draft-model decoding type DraftTarget.")
    if sp.draft and sp.draft.endswith("_PATH"):
        notes.append(f"Replace {sp.draft} with the draft checkpoint's Hugging Face id or path.")
    return {"decoding_type": kind, "max_draft_len": sp.tokens, "speculative_model_dir": sp.draft}


def _lora(spec: DeploymentSpec, backend: str, notes: list[str]) -> dict | None:
    """The adapters as the YAML's lora_config (the PyTorch backend's; requests bring their adapters' paths), or
    the sentence saying they are not carried."""
    adapters = spec.adapters
    if adapters is None:
        return None
    if backend == "tensorrt":
        notes.append(
            "LoRA is not carried for TensorRT-LLM's TensorRT backend: its engine must be built with the adapters' "
            f"shapes (trtllm-build --lora_plugin, --max_lora_rank {adapters.rank}, --lora_target_modules), so these "
            f"commands serve the base model only, without the plan's {adapters.count:,} adapters."
        )
        return None
    notes.append(
        "trtllm-serve takes each request's adapter as a lora_request ({lora_name, lora_int_id, lora_path}) in the "
        "request body, which its benchmark client does not send: the benchmark measures the base model alone, "
        f"without the {adapters.count:,} adapters' kernels or swaps the plan prices."
    )
    return {
        "lora_target_modules": [lora.TRTLLM_MODULES[t] for t in adapters.targets],
        "max_lora_rank": adapters.rank,
        "max_loras": adapters.gpu_slots,
        "max_cpu_loras": lora.cpu_slots(adapters),
    }


def _notes(spec: DeploymentSpec, backend: str) -> list[str]:
    notes = [f"trtllm-serve reads {OPTIONS_FILE} from {CONFIG_DIR} (the manifest mounts it from a ConfigMap)."]
    if spec.vendor != "nvidia":
        notes.append(f"TensorRT-LLM runs on NVIDIA GPUs only; the plan's GPU is {spec.gpu_name}.")
    if backend == "tensorrt":
        notes.append(
            "The TensorRT-engine releases (v0.x) build an engine with the same limits first (trtllm-build "
            "--max_batch_size/--max_num_tokens/--max_seq_len); this is trtllm-serve's TensorRT backend, which builds "
            "it on start."
        )
    if spec.data_parallel > 1:
        notes.append(
            f"With attention data parallelism each of the {spec.data_parallel} ranks schedules its own batch of "
            f"--max_batch_size {spec.max_num_seqs} (assumed per rank)."
        )
    if spec.nodes_per_server > 1:
        notes.append(
            f"One server spans {spec.nodes_per_server} nodes: TensorRT-LLM runs it under MPI (mpirun or SLURM with "
            "trtllm-llmapi-launch); the LeaderWorkerSet starts the pods, the MPI launch across them is yours."
        )
    if not spec.honor_sliding_window:
        notes.append("The plan caches sliding-window layers in full; TensorRT-LLM has no switch for it.")
    notes.append("TensorRT-LLM's KV blocks hold 32 tokens (tokens_per_block, its default; the runtime profile's).")
    return notes


def _benchmark(spec: DeploymentSpec) -> list[str]:
    argv = ["python", "-m", "tensorrt_llm.serve.scripts.benchmark_serving"]
    return argv + vllm_benchmark_args(spec, "openai", PORT, random_ids=True)
