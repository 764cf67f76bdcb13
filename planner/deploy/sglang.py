"""SGLang: `python -m sglang.launch_server` and `python -m sglang.bench_serving` for a deployment spec.

Flag names and value spellings checked against SGLang's own parsers (names only; no code taken):
- sgl-project/sglang@001067fffe33 python/sglang/srt/server_args.py ServerArgs (each field's flag is its name in
  kebab case): --model-path, --tp-size, --pp-size, --dp-size, --enable-dp-attention, --ep-size (aliases --ep,
  --expert-parallel-size), --mem-fraction-static, --max-running-requests, --chunked-prefill-size (-1: off),
  --max-prefill-tokens, --kv-cache-dtype (auto, fp8_e5m2, fp8_e4m3, bf16, nvfp4, ...), --quantization (fp8, ...),
  --dtype, --context-length, --disable-radix-cache, --nnodes, --node-rank, --dist-init-addr,
  --speculative-algorithm (EAGLE, EAGLE3, NEXTN, STANDALONE), --speculative-draft-model-path,
  --speculative-num-steps, --speculative-eagle-topk, --speculative-num-draft-tokens. With DP attention the
  scheduler gives each rank max_running_requests // dp_size (requested_per_worker in the same tree).
- LoRA adapters: the flags, YAML keys and their sources are in planner/deploy/lora.py.
- The client: sgl-project/sglang@50a613687fe1 python/sglang/bench_serving.py (--backend, --base-url, --model,
  --dataset-name random, --random-input-len, --random-output-len, --random-range-ratio, --num-prompts,
  --request-rate, --seed, --output-file JSONL; --max-concurrency in later trees). Its random dataset draws
  lengths uniformly from [max(int(L x ratio), 1), L] (sample_random_requests; compute_random_lens later), so the
  plan's +/- r around L becomes L' = ceil(L(1 + r)) and ratio (1 - r) / (1 + r).
"""

from __future__ import annotations

import math
from dataclasses import replace

from planner.deploy import lora
from planner.deploy.command import (
    EngineLaunch,
    number,
    rate_text,
    result_file,
    shell_command,
    weight_note,
    weight_source,
)
from planner.deploy.spec import Adapters, DeploymentSpec

PORT = 30000
IMAGE = "lmsysorg/sglang:latest"
DIST_PORT = 20000
KV_DTYPES = {"bf16": "auto", "fp16": "auto", "fp32": "auto", "fp8": "fp8_e4m3", "nvfp4": "nvfp4"}
SPECULATIVE_ALGORITHMS = {"eagle": "EAGLE", "mtp": "NEXTN", "draft_model": "STANDALONE"}


def launch(spec: DeploymentSpec) -> EngineLaunch:
    notes: list[str] = []
    dp = spec.data_parallel
    argv = ["python", "-m", "sglang.launch_server", "--model-path", spec.model, "--host", "0.0.0.0"]
    argv += ["--port", str(PORT), "--tp-size", str(spec.tensor_parallel * dp)]
    if spec.pipeline_parallel > 1:
        argv += ["--pp-size", str(spec.pipeline_parallel)]
    if dp > 1:
        argv += ["--dp-size", str(dp), "--enable-dp-attention"]
    if spec.expert_parallel > 1:
        argv += ["--ep-size", str(spec.expert_parallel)]
        notes.append("Earlier SGLang 0.4 releases also need --enable-ep-moe beside --ep-size.")
    chunk = spec.max_num_batched_tokens if spec.chunked_prefill else -1
    argv += ["--mem-fraction-static", number(spec.memory_fraction)]
    argv += ["--max-running-requests", str(spec.max_num_seqs * dp)]
    argv += ["--chunked-prefill-size", str(chunk), "--max-prefill-tokens", str(spec.max_num_batched_tokens)]
    argv += _kv_and_weights(spec, notes)
    if spec.max_model_len is not None:
        argv += ["--context-length", str(spec.max_model_len)]
    if not spec.prefix_caching:
        argv.append("--disable-radix-cache")
        notes.append("The plan counts no prefix-cache hits, so the radix (prefix) cache is off.")
    argv += _speculative(spec, notes)
    argv += _lora(spec, notes)
    notes += _unspoken(spec, dp)
    leader = worker = None
    if spec.nodes_per_server > 1:
        # the variables stay unquoted so the pod's shell expands them (LeaderWorkerSet sets both in every pod)
        leader = shell_command(argv) + f" --nnodes {spec.nodes_per_server} --node-rank $LWS_WORKER_INDEX"
        leader += f" --dist-init-addr $LWS_LEADER_ADDRESS:{DIST_PORT}"
        worker = leader
        argv += ["--nnodes", str(spec.nodes_per_server), "--node-rank", "NODE_RANK"]
        argv += ["--dist-init-addr", f"LEADER_HOST:{DIST_PORT}"]
        notes.append(
            f"One server spans {spec.nodes_per_server} nodes: run the command on each with its --node-rank "
            "(0 on LEADER_HOST)."
        )
    return EngineLaunch(
        serve_argv=tuple(argv),
        benchmark_argv=tuple(_benchmark(spec, notes)),
        image=IMAGE,
        port=PORT,
        servers=spec.servers,
        gpus_per_server=spec.gpus_per_server,
        notes=tuple(notes),
        leader_script=leader,
        worker_script=worker,
        result_file=result_file(spec, "jsonl"),
    )


def _kv_and_weights(spec: DeploymentSpec, notes: list[str]) -> list[str]:
    argv: list[str] = []
    kv = KV_DTYPES.get(spec.kv_cache_dtype)
    if kv is None:
        notes.append(
            f"SGLang has no {spec.kv_cache_dtype} KV cache: it stays in the model's dtype, larger than planned."
        )
        kv = "auto"
    argv += ["--kv-cache-dtype", kv]
    source = weight_source(spec)
    if source == "online_fp8":
        argv += ["--quantization", "fp8"]
    elif source in ("fp16", "fp32"):
        argv += ["--dtype", {"fp16": "float16", "fp32": "float32"}[source]]
    elif note := weight_note(spec, source, "SGLang"):
        notes.append(note)
    return argv


def _speculative(spec: DeploymentSpec, notes: list[str]) -> list[str]:
    sp = spec.speculation
    if sp is None:
        return []
    argv = ["--speculative-algorithm", SPECULATIVE_ALGORITHMS[sp.method]]
    if sp.draft is not None:
        argv += ["--speculative-draft-model-path", sp.draft]
    argv += ["--speculative-num-steps", str(sp.tokens), "--speculative-eagle-topk", "1"]
    argv += ["--speculative-num-draft-tokens", str(sp.tokens + 1)]
    if sp.method == "draft_model":
        notes.append("SGLang drafts with a separate model (STANDALONE) from v0.5; 0.4 releases take EAGLE heads only.")
    if sp.draft and sp.draft.endswith("_PATH"):
        notes.append(f"Replace {sp.draft} with the draft checkpoint's Hugging Face id or path.")
    return argv


def _lora(spec: DeploymentSpec, notes: list[str]) -> list[str]:
    """The adapters: the plan's GPU slots per batch, largest rank and projections (listed by name: `all` would also
    wrap projections the plan holds no slots for), the host cap when the plan keeps fewer than all, the adapters."""
    adapters = spec.adapters
    if adapters is None:
        return []
    argv = ["--enable-lora", "--max-loras-per-batch", str(adapters.gpu_slots)]
    argv += ["--max-lora-rank", str(adapters.rank), "--lora-target-modules"]
    argv += [lora.HF_MODULES[t] for t in adapters.targets]
    loaded = _loaded(adapters)
    if loaded.count < adapters.count:
        argv += ["--max-loaded-loras", str(loaded.count)]
        notes.append(
            f"SGLang keeps at most {loaded.count} adapters loaded (--max-loaded-loras, the plan's host slots) and "
            f"reads none back on demand: the commands start it with {loaded.count} of the {adapters.count:,} in "
            "--lora-paths and the benchmark sends those; swap the others in and out through /load_lora_adapter and "
            "/unload_lora_adapter (the plan reads a missing adapter from storage by itself)."
        )
    argv += ["--lora-paths", *lora.name_path_pairs(loaded)]
    notes.append(lora.placeholder_note(loaded, "--lora-paths", "--lora-name"))
    return argv


def _loaded(adapters: Adapters) -> Adapters:
    """The adapters SGLang starts with: all of them, or as many as the plan's host memory keeps."""
    host = lora.cpu_slots(adapters)
    return adapters if host >= adapters.count else replace(adapters, count=host)


def _unspoken(spec: DeploymentSpec, dp: int) -> list[str]:
    """What the plan assumes that SGLang decides without a flag."""
    notes = [
        "SGLang pools KV per token (page size 1, its default and the runtime profile's); an attention backend "
        "that pages in blocks (FlashMLA: 64 tokens) rounds each sequence up."
    ]
    if dp > 1:
        notes.append(
            f"--max-running-requests is the server's: with DP attention each of the {dp} ranks takes "
            f"{spec.max_num_seqs}, the plan's sequences per replica."
        )
    if not spec.honor_sliding_window:
        notes.append(
            "SGLang has no switch to cache sliding-window layers in full; the plan's full-window KV is not set."
        )
    return notes


def _benchmark(spec: DeploymentSpec, notes: list[str]) -> list[str]:
    load, lengths = spec.load, spec.lengths
    r = lengths.range_ratio
    prompt = math.ceil(lengths.prompt_tokens * (1 + r))
    output = math.ceil(lengths.output_tokens * (1 + r))
    ratio = round((1 - r) / (1 + r), 4)
    argv = ["python", "-m", "sglang.bench_serving", "--backend", "sglang", "--base-url", f"http://localhost:{PORT}"]
    argv += ["--model", spec.model, "--dataset-name", "random", "--random-input-len", str(prompt)]
    argv += ["--random-output-len", str(output), "--random-range-ratio", number(ratio)]
    argv += ["--num-prompts", str(load.num_prompts), "--request-rate", rate_text(load.request_rate)]
    if load.max_concurrency is not None:
        argv += ["--max-concurrency", str(load.max_concurrency)]
    argv += ["--seed", str(load.seed), "--output-file", result_file(spec, "jsonl")]
    if spec.adapters is not None:  # each request's lora_path names one of the served adapters
        argv += ["--lora-name", *lora.names(_loaded(spec.adapters))]
        if note := lora.uniform_draw_note(spec.adapters, "bench_serving (--lora-name)"):
            notes.append(note)
    if r > 0:
        notes.append(
            f"bench_serving draws lengths from [L x ratio, L]: the plan's {lengths.prompt_tokens} +/- {r:g} prompt "
            f"tokens become --random-input-len {prompt} with --random-range-ratio {ratio:g} (the mean stays close)."
        )
    if load.burstiness != 1.0:
        notes.append(
            f"bench_serving sends Poisson arrivals only: the stream's burstiness {load.burstiness:g} is not set."
        )
    return argv
