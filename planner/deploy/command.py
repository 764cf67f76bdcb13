"""What an engine module returns for a deployment spec, and the pieces every engine's spelling shares: the
weights' source, the benchmark's result file, the shell form of an argument list."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from planner.deploy.spec import DeploymentSpec

WeightSource = Literal["as_stored", "online_fp8", "fp16", "fp32", "needs_checkpoint", "unquantized_checkpoint"]
CONFIG_DIR = "/etc/headroom"  # where a manifest mounts the files a command reads


@dataclass(frozen=True, slots=True)
class EngineLaunch:
    """One engine's commands for a spec: the server (argv), the benchmark client (argv), the files the server
    reads (name -> text), its container image and port, and what it could not say as a flag (notes)."""

    serve_argv: tuple[str, ...]
    benchmark_argv: tuple[str, ...]
    image: str
    port: int
    servers: int  # independent server instances (the manifest's replicas)
    gpus_per_server: int
    notes: tuple[str, ...] = ()
    files: tuple[tuple[str, str], ...] = ()
    health_path: str = "/health"
    # A server spanning nodes: the shell line each leader and worker pod runs (LeaderWorkerSet), else None.
    leader_script: str | None = None
    worker_script: str | None = None
    result_file: str = ""


def weight_source(spec: DeploymentSpec) -> WeightSource:
    """How the engine gets the planned weight format: the checkpoint as stored, FP8 quantized at load (engines
    quantize BF16 weights to FP8 on the fly), a 16/32-bit dtype setting, or a checkpoint in that format."""
    stored = spec.checkpoint_dtype or "bf16"
    if spec.weight_dtype == stored:
        return "as_stored"
    if spec.weight_dtype == "fp8" and stored == "bf16":
        return "online_fp8"
    if spec.weight_dtype in ("fp16", "fp32") and stored == "bf16":
        return spec.weight_dtype  # type: ignore[return-value]  # the literal of that name
    if spec.weight_dtype in ("bf16", "fp16", "fp32"):
        return "unquantized_checkpoint"
    return "needs_checkpoint"


def weight_note(spec: DeploymentSpec, source: WeightSource, engine_title: str) -> str | None:
    """The sentence for a weight format no flag produces."""
    if source == "needs_checkpoint":
        return (
            f"The plan serves {spec.weight_dtype} weights, which {engine_title} does not produce at load: serve a "
            f"checkpoint quantized to {spec.weight_dtype} (its quantization_config selects the kernels) in place of "
            f"{spec.model}."
        )
    if source == "unquantized_checkpoint":
        return (
            f"The plan serves {spec.weight_dtype} weights but the checkpoint stores {spec.checkpoint_dtype}: serve an "
            f"unquantized ({spec.weight_dtype}) copy of the model."
        )
    return None


def result_file(spec: DeploymentSpec, suffix: str = "json") -> str:
    """The benchmark's result file name: engine, model, layout and load, so several runs sit side by side."""
    model = re.sub(r"[^a-z0-9.]+", "-", spec.model.rsplit("/", 1)[-1].lower()).strip("-") or "model"
    load = f"rate{spec.load.request_rate:g}" if spec.load.request_rate is not None else "rateinf"
    if spec.load.max_concurrency is not None:
        load += f"-conc{spec.load.max_concurrency}"
    layout = f"tp{spec.tensor_parallel}" + (f"-ep{spec.expert_parallel}" if spec.expert_parallel > 1 else "")
    return f"headroom-{spec.engine}-{model}-{layout}-{load}.{suffix}"


def rate_text(rate: float | None) -> str:
    return "inf" if rate is None else f"{rate:g}"


def number(value: float) -> str:
    """A flag value as the parsers read it: integers without a point, fractions as written."""
    return f"{value:g}" if value != int(value) else str(int(value))


def shell_command(argv: Sequence[str]) -> str:
    """The argument list as one shell line (arguments quoted where the shell needs it)."""
    return shlex.join(argv)


def shell_lines(argv: Sequence[str]) -> str:
    """The shell line broken before each long option, for reading (`vllm serve M \\` then `--tensor-parallel-size 8
    \\` ...); what precedes the first long option (`python -m sglang.launch_server`) stays on the first line."""
    groups: list[list[str]] = []
    for token in argv:
        if not groups or token.startswith("--"):
            groups.append([token])
        else:
            groups[-1].append(token)
    return " \\\n    ".join(shlex.join(group) for group in groups)


def vllm_benchmark_args(spec: DeploymentSpec, backend: str, port: int, random_ids: bool = False) -> list[str]:
    """The arguments of vLLM's serving benchmark after its entry point, for the plan's load and lengths: the random
    dataset, the request rate or client concurrency, a fixed seed, the percentiles and a saved result file.
    TensorRT-LLM's `tensorrt_llm.serve.scripts.benchmark_serving` is a port of that client and takes the same ones
    (plus `--random-ids`, its random dataset's token ids without a tokenizer round trip)."""
    load, lengths = spec.load, spec.lengths
    argv = ["--backend", backend, "--base-url", f"http://localhost:{port}", "--model", spec.model]
    argv += ["--dataset-name", "random", *(["--random-ids"] if random_ids else [])]
    argv += ["--random-input-len", str(lengths.prompt_tokens), "--random-output-len", str(lengths.output_tokens)]
    argv += ["--random-range-ratio", number(lengths.range_ratio)]
    argv += ["--num-prompts", str(load.num_prompts), "--request-rate", rate_text(load.request_rate)]
    if load.burstiness != 1.0:
        argv += ["--burstiness", number(load.burstiness)]
    if load.max_concurrency is not None:
        argv += ["--max-concurrency", str(load.max_concurrency)]
    argv += ["--seed", str(load.seed), "--ignore-eos", "--percentile-metrics", "ttft,tpot,itl,e2el"]
    argv += ["--metric-percentiles", "50,90,95,99", "--save-result", "--result-filename", result_file(spec)]
    return argv
