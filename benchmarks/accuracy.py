"""Headroom's error against published measurements.

    .venv/bin/python benchmarks/accuracy.py [--reference ../shared/reference] [--out benchmarks/accuracy]
                                            [--sensitivity]

Turns every usable measured row of the reference tables into a scenario, plans it with the default
efficiencies (never tuned per case), and writes:
  <out>/report.csv   case, family, reference, predicted, error %, reading, source row
  <out>/report.md    the table, per-family median and p90 |error|, worst cases, unmapped rows with reasons
  planner/accuracy.json   per-family error summary that the planner turns into error bands
`--sensitivity` adds how each family's error moves when an efficiency default moves by +-20 %.

The `serving` family replays published serving-benchmark runs (vllm bench serve, NVIDIA NIM) from
benchmarks/accuracy/serving_reference.csv through the traffic simulator (planner.inference.traffic): the
run's model, GPUs, lengths, request count, rate and client concurrency, with the engine's documented
defaults. Its errors are summarised per metric; its band is reported (flagged wide) but no plan number reads it.

Every family's band (planner.uncertainty.band_summary) is built from all its cases, and its promise (80 % of
cases) is checked by leaving each case out (serving: each run); report.md and planner/accuracy.json give the
promised and the achieved coverage. benchmarks/accuracy/ceilings.json caps each family's median |error|
(tests/test_accuracy_report.py): a ceiling only moves down, in the commit that earns it.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import statistics
import sys
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import accuracy_decisions  # noqa: E402
from planner import plan  # noqa: E402
from planner.dtypes import DTYPES  # noqa: E402
from planner.errors import PlanningError  # noqa: E402
from planner.hardware.catalog import get_accelerator  # noqa: E402
from planner.inference.scenario import InferenceScenario  # noqa: E402
from planner.inference.traffic import TrafficEngine  # noqa: E402
from planner.inference.workload import Traffic  # noqa: E402
from planner.physics import collectives, gemm_efficiency, moe_efficiency, roofline, runtimes  # noqa: E402
from planner.physics.efficiency import DEFAULT_EFFICIENCY, Efficiency  # noqa: E402
from planner.physics.runtimes import DEFAULT_RUNTIME  # noqa: E402
from planner.scenario import parse_scenario  # noqa: E402
from planner.uncertainty import (  # noqa: E402
    REGIME_MIN_CASES,
    REGIME_MIN_SOURCES,
    REGIME_RULE,
    TRAFFIC_RANGE_KINDS,
    band_summary,
    coverage_notes,
    coverage_text,
    regime_range_usable,
)
from planner.uncertainty import serving_regime as regime_label  # noqa: E402

try:  # the versioned runtime (`vllm@0.7.3`, planner/physics/schedulers.py): V0 rows replay only where it exists
    from planner.physics.schedulers import resolve_runtime
except ImportError:  # pragma: no cover - an engine without versioned runtimes
    resolve_runtime = None

DEFAULT_REFERENCE = ROOT.parent / "shared" / "reference"
REFERENCE_FILES = ("memory_measured.csv", "throughput_measured.csv")
SUMMARY_FILE = ROOT / "planner" / "accuracy.json"
SERVING_FILE = ROOT / "benchmarks" / "accuracy" / "serving_reference.csv"
CEILINGS_FILE = ROOT / "benchmarks" / "accuracy" / "ceilings.json"
FAMILIES = ("memory", "decode_speed", "ttft", "max_throughput", "training_step")  # the families error bands read
SERVING = "serving"  # published serving runs through the traffic simulator; per metric; its band is reported only

GPU_IDS = {
    "H100-SXM-80GB": "h100-sxm",
    "H200-SXM-141GB": "h200",
    "A100-SXM-80GB": "a100-80gb",
    "A100 40GB": "a100-40gb",
    "A100 80GB": "a100-80gb",
    "A100 80GB (Selene)": "a100-80gb",
    "A100 80GB (Selene DGX A100)": "a100-80gb",
}
MODEL_IDS = {"OPT-13B": "opt-13b", "OPT-66B": "opt-66b", "OPT-175B": "opt-175b", "GPT-J-6B": "gpt-j-6b"}


@dataclass
class Case:
    case_id: str
    family: str
    description: str
    reference: float
    unit: str
    predict: Callable[[Efficiency], float]
    reading: str
    source: str
    metric: str = ""  # serving family: the benchmark's metric (mean_ttft_ms, ...)
    group: str = ""  # serving family: the load regime the run is in (SERVING_GROUPS)
    run: object = None  # serving family: the ServingRun replayed
    publisher: str = ""  # serving family: the independent source the row comes from (serving_source)
    regime: str = ""  # serving family: model kind x GPUs x vendor x engine (serving_regime)


@dataclass
class Unmapped:
    row_id: str
    reason: str


@dataclass
class Calibration:
    """A stand-in calibration record carrying only efficiencies (for the sensitivity study)."""

    efficiency: Efficiency
    runtime_overhead_correction_bytes: float = 0.0
    label: str = "sensitivity"
    mapped_to_any_gpu: bool = True
    benchmark: None = None  # not fitted to a serving benchmark, so it describes no serving stack

    def applies_to(self, gpu_id: str) -> bool:
        """An efficiency what-if, not a measurement of one device: it applies to every GPU."""
        return True


def _plan(scenario, efficiency: Efficiency):
    return plan(scenario, None if efficiency == DEFAULT_EFFICIENCY else Calibration(efficiency))


def _read(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


# ---------------------------------------------------------------------------------------------
# memory rows (vLLM paper, Table 1 and Fig. 1)


# The paper measured vLLM v0.1 (2023): its accounting (runtime "vllm-v0": KV = 0.9 x total - the torch peak of a
# profiling run, nothing else) and its defaults, max_num_batched_tokens 2560 (the profiling step) and
# max_num_seqs 256 (the sampler's rows; the scenario's concurrency stands for it). V1's accounting would charge
# NCCL buffers that this engine never counted.
PAPER_ENGINE = {"runtime": "vllm-v0", "prefill_chunk_tokens": 2560, "concurrency": 256}


def memory_cases(rows: list[dict]) -> tuple[list[Case], list[Unmapped]]:
    cases, unmapped = [], []
    by_id = {r["id"]: r for r in rows}
    # Table 1 of the vLLM paper: parameter memory and KV memory (all GPUs) per configuration.
    layouts = {
        ("M006", "M007"): ("opt-13b", "a100-40gb", 1),
        ("M008", "M009"): ("opt-66b", "a100-40gb", 4),
        ("M010", "M011"): ("opt-175b", "a100-80gb", 8),
    }
    for (weights_id, kv_id), (model, gpu, tp) in layouts.items():
        scenario = InferenceScenario(
            model=model,
            gpu=gpu,
            num_gpus=tp,
            tensor_parallel=tp,
            prompt_tokens=1024,
            output_tokens=1024,
            gpu_memory_utilization=0.9,
            **PAPER_ENGINE,
        )
        weights_row, kv_row = by_id[weights_id], by_id[kv_id]
        cases.append(
            Case(
                weights_id,
                "memory",
                f"{weights_row['model']} {weights_row['hardware']} x{tp}: parameter memory",
                float(weights_row["value"]) * 1e9,
                "bytes",
                lambda eff, s=scenario: _plan(s, eff).memory.components["weights_bytes"] * s.num_gpus,
                "GB read as 1e9 bytes (26 GB = 12.9B params x 2 B); all GPUs summed",
                weights_id,
            )
        )
        cases.append(
            Case(
                kv_id,
                "memory",
                f"{kv_row['model']} {kv_row['hardware']} x{tp}: memory available for KV cache",
                float(kv_row["value"]) * 2**30,
                "bytes",
                lambda eff, s=scenario: _kv_pool(_plan(s, eff)) * s.num_gpus,
                "GB read as GiB (the paper's 12 GB = 15.7K slots x 800 KB = 12.0 GiB); predicted = vLLM v0.1's pool "
                "(runtime vllm-v0): 0.9 x memory minus weights and the profiling run's activations (2560 tokens) and "
                "sampler (256 rows), summed over GPUs",
                kv_id,
            )
        )
    scenario = InferenceScenario(
        model="opt-13b",
        gpu="a100-40gb",
        num_gpus=1,
        tensor_parallel=1,
        prompt_tokens=1024,
        output_tokens=1024,
        **PAPER_ENGINE,
    )
    cases.append(
        Case(
            "M003",
            "memory",
            "OPT-13B on A100-40GB: share of memory holding weights",
            65.0,
            "%",
            lambda eff, s=scenario: 100 * _plan(s, eff).memory.components["weights_bytes"] / (40 * 2**30),
            "share of the 40 GiB device; the paper's figure is approximate ('approximately 65%')",
            "M003",
        )
    )
    cases.append(
        Case(
            "M004",
            "memory",
            "OPT-13B on A100-40GB: share of memory holding the KV cache",
            30.0,
            "%",
            lambda eff, s=scenario: 100 * _kv_pool(_plan(s, eff)) / (40 * 2**30),
            "KV pool when the engine fills its budget, as a share of 40 GiB ('close to 30%')",
            "M004",
        )
    )
    for row in rows:
        if row["id"] in {c.source for c in cases}:
            continue
        kind = row["value_type"]
        if not kind.startswith("measured") and kind != "paper-table":
            unmapped.append(Unmapped(row["id"], f"{kind} row: checks a formula (tests/validation), not a measurement"))
        else:
            unmapped.append(Unmapped(row["id"], _memory_unmapped_reason(row)))
    return cases, unmapped


def _kv_pool(p) -> float:
    return p.memory.budget_bytes - (p.memory.total_bytes - p.memory.components["kv_cache_bytes"])


def _memory_unmapped_reason(row: dict) -> str:
    if row["id"] == "M005":
        return "fragmentation of pre-vLLM systems (a range across systems); Headroom models a paged allocator"
    if row["id"] in ("M012", "M013"):
        return "savings from sharing KV blocks across parallel samples / beams; no such workload in a scenario"
    if row["id"] == "M022":
        return "read from prose describing a figure ('<20%'), not a number; checked qualitatively in training tests"
    return "no scenario can express this quantity"


# ---------------------------------------------------------------------------------------------
# inference throughput / latency rows


def inference_cases(rows: list[dict]) -> tuple[list[Case], list[Unmapped]]:
    cases, unmapped = [], []
    for row in rows:
        if row["category"] != "inference":
            continue
        model = _inference_model(row["model"])
        gpu = GPU_IDS.get(row["hardware"])
        if model is None or gpu is None:
            unmapped.append(
                Unmapped(row["id"], f"model '{row['model']}' or GPU '{row['hardware']}' not in the catalog")
            )
            continue
        dtype = "fp8" if "FP8" in row["precision"].upper() else "bf16"
        prompt = int(row["input_len"])
        output = int(row["output_len"] or 128)
        requests = _int_in(row["batch_or_concurrency"])
        common = dict(
            model=model,
            gpu=gpu,
            num_gpus=1,
            tensor_parallel=1,
            weight_dtype=dtype,
            kv_cache_dtype=dtype,
            prompt_tokens=prompt,
            output_tokens=output,
            runtime=_runtime_of(row["framework"]),
        )
        if "max throughput" in row["scenario"]:
            # All requests queued at once: the engine runs as many as fit in its KV pool, up to its
            # maximum batch (TensorRT-LLM's default max_batch_size, 2048 for these runs).
            reading = (
                "all requests at once: concurrency = min(requests, 2048, what fits); runtime "
                f"{common['runtime']} with its share 0.95 (kv_cache_free_gpu_mem_fraction 0.90-0.95)"
            )
            cases.append(
                Case(
                    row["id"],
                    "max_throughput",
                    f"{row['model'][:28]} {row['hardware']} {dtype} {prompt}/{output}",
                    float(row["value"]),
                    "tokens/s",
                    lambda eff, c=common, n=requests: _max_throughput(c, n, eff).performance.output_tokens_per_second,
                    reading,
                    row["id"],
                )
            )
            if row.get("ttft_ms"):
                cases.append(
                    Case(
                        f"{row['id']}-ttft",
                        "ttft",
                        f"{row['model'][:28]} {row['hardware']} {dtype} batch {requests} x {prompt} tokens",
                        float(row["ttft_ms"]) / 1e3,
                        "seconds",
                        lambda eff, c=common, n=requests: (
                            _plan(InferenceScenario(**c, concurrency=n), eff).performance.burst_ttft_seconds
                        ),
                        "TTFT of a batch of prompts arriving together (burst_ttft_seconds)",
                        row["id"],
                    )
                )
        elif "min latency" in row["scenario"]:
            scenario = InferenceScenario(**common, concurrency=1)
            cases.append(
                Case(
                    row["id"],
                    "decode_speed",
                    f"{row['model'][:28]} {row['hardware']} {dtype} batch 1",
                    float(row["value"]),
                    "tokens/s",
                    lambda eff, s=scenario: 1 / _plan(s, eff).performance.decode_step_seconds,
                    "batch-1 output tokens/s read as 1 / time per decode step (output length not given)",
                    row["id"],
                )
            )
            if row.get("ttft_ms"):
                cases.append(
                    Case(
                        f"{row['id']}-ttft",
                        "ttft",
                        f"{row['model'][:28]} {row['hardware']} {dtype} one {prompt}-token prompt",
                        float(row["ttft_ms"]) / 1e3,
                        "seconds",
                        lambda eff, s=scenario: _plan(s, eff).performance.ttft_seconds,
                        "first-token latency of one request on an idle GPU",
                        row["id"],
                    )
                )
        else:
            unmapped.append(Unmapped(row["id"], f"scenario '{row['scenario']}' has no mapping"))
    return cases, unmapped


# The engine a reference row was measured on -> the runtime profile that budgets its memory
# (planner/physics/runtimes.py); rows of other engines keep the default (vLLM V1).
FRAMEWORK_RUNTIMES = {
    "tensorrt-llm v0.": "tensorrt-llm-engine",  # the TensorRT-engine releases (the H100-vs-A100 blog's v0.5.0)
    "tensorrt-llm": "tensorrt-llm",
    "sglang": "sglang",
    "nim-trtllm": "tensorrt-llm",
}


def _runtime_of(framework: str) -> str:
    """'TensorRT-LLM (v1.0-era docs)' -> 'tensorrt-llm'; an engine without a profile -> the default runtime."""
    name = framework.strip().lower()
    for prefix, runtime in FRAMEWORK_RUNTIMES.items():
        if name.startswith(prefix):
            return runtime
    return DEFAULT_RUNTIME


def _inference_model(name: str) -> str | None:
    if name.startswith("Llama-3.1-8B"):
        return "llama-3.1-8b"
    return MODEL_IDS.get(name)


def _int_in(text: str) -> int:
    match = re.search(r"\d+", text.replace(",", ""))
    return int(match.group()) if match else 1


def _max_throughput(common: dict, requests: int, efficiency: Efficiency):
    probe = _plan(InferenceScenario(**common, concurrency=1, gpu_memory_utilization=0.95), efficiency)
    concurrency = max(1, min(requests, 2048, probe.memory.max_concurrency))
    return _plan(InferenceScenario(**common, concurrency=concurrency, gpu_memory_utilization=0.95), efficiency)


# ---------------------------------------------------------------------------------------------
# training rows (Megatron-LM, Narayanan et al. 2021, Tables 1-2)


def training_cases(rows: list[dict]) -> tuple[list[Case], list[Unmapped]]:
    cases, unmapped = [], []
    try:
        from planner.training.scenario import TrainingScenario  # noqa: F401
    except ImportError:
        return [], [Unmapped(r["id"], "training engine not available") for r in rows if r["category"] == "training"]
    for row in rows:
        if row["category"] != "training":
            continue
        mapped = _megatron_scenario(row)
        if isinstance(mapped, str):
            unmapped.append(Unmapped(row["id"], mapped))
            continue
        scenario, reading = mapped
        cases.append(
            Case(
                row["id"],
                "training_step",
                f"{row['model'][:34]} on {row['num_gpus']} GPUs ({row['parallelism'][:30]})",
                float(row["value"]),
                "TFLOP/s per GPU",
                lambda eff, s=scenario: _achieved_tflops(s, eff),
                reading,
                row["id"],
            )
        )
    return cases, unmapped


def _megatron_config(heads: int, hidden: int, layers: int) -> dict:
    return {
        "model_type": "gpt2",
        "n_embd": hidden,
        "n_head": heads,
        "n_layer": layers,
        "n_positions": 2048,
        "vocab_size": 51200,
        "tie_word_embeddings": True,
    }


_GPT_SHAPES = {  # Narayanan et al. Table 1 / Table 2 (heads, hidden, layers)
    "174.6B": (96, 12288, 96),
    "529.6B": (128, 20480, 105),
}


def _megatron_scenario(row: dict):
    match = re.search(r"heads (\d+), hidden (\d+), layers (\d+)", row["model"])
    if match:
        heads, hidden, layers = map(int, match.groups())
    else:
        size = re.search(r"GPT ([\d.]+B)", row["model"])
        if not size or size.group(1) not in _GPT_SHAPES:
            return f"model shape of '{row['model']}' not given"
        heads, hidden, layers = _GPT_SHAPES[size.group(1)]
    gpus = int(row["num_gpus"])
    batch = re.search(r"global (?:batch )?(\d+)", row["batch_or_concurrency"])
    micro = re.search(r"micro (\d+)", row["batch_or_concurrency"])
    layout = re.search(r"TP(\d+) PP(\d+) DP(\d+)", row["parallelism"])
    if layout:
        tp, pp, dp = map(int, layout.groups())
        zero = 0
    elif "ZeRO-3" in row["parallelism"]:
        # Narayanan et al. 2021 Table 2's ZeRO-3 rows are DeepSpeed's 2021 implementation, whose parameter gathers
        # moved ~16 GB/s per GPU on Selene (throughput halves as the GPUs double) where NCCL's rings over the node's
        # 8 NICs measure 192 GB/s busBW on the same DGX A100 (NVIDIA/nccl#812); the planner prices NCCL. Until
        # 2026-12-02 it priced every cross-node ring at one NIC, which matched these rows and no other source.
        return (
            "DeepSpeed ZeRO-3 (2021): its parameter-gather rate (~16 GB/s per GPU on 8 x 25 GB/s NICs per node) is a "
            "framework property the planner does not model (it prices NCCL's rings over every member's NIC); "
            "tests/training/validation keeps them as strict expected failures"
        )
    elif "model-parallel size" in row["parallelism"]:
        size = int(re.search(r"model-parallel size (\d+)", row["parallelism"]).group(1))
        tp, pp = 8, size // 8
        dp = gpus // size
        zero = 0
    else:
        return f"parallelism '{row['parallelism']}' not understood"
    # Megatron-LM 2021 on Selene: fp16 mixed precision with fp32-master Adam, full recomputation, unfused
    # attention with dropout, no sequence parallelism (2022), 1F1B, gradients all-reduced after the
    # pipeline flush, 8 x HDR 200 Gb/s InfiniBand per node = 25 GB/s per GPU.
    scenario = {
        "kind": "training",
        "model": _megatron_config(heads, hidden, layers),
        "gpu": "a100-80gb",
        "num_gpus": gpus,
        "tensor_parallel": tp,
        "pipeline_parallel": pp,
        "data_parallel": dp,
        "zero_stage": zero,
        "precision": "mixed_fp16",
        "optimizer": "adamw",
        "micro_batch_size": int(micro.group(1)) if micro else 1,
        "global_batch_size": int(batch.group(1)) if batch else 512,
        "sequence_length": 2048,
        "activation_checkpointing": "full",
        "flash_attention": False,
        "dropout": True,
        "sequence_parallel": False,
        "overlap_grad_reduce": False,
        "inter_node_bandwidth_bytes_per_second": 25e9,
    }
    try:
        return parse_scenario(scenario), (
            "hardware TFLOP/s per GPU incl. the recompute forward "
            "(the paper's 96Bslh^2(1+s/6h+V/16lh) / step time / GPUs); Selene: "
            "25 GB/s InfiniBand per GPU, no sequence parallelism, unfused attention "
            "with dropout, micro-batch 1 where the table gives none"
        )
    except Exception as exc:  # a layout the planner rejects is a finding, reported as unmapped
        return f"scenario rejected: {exc}"


def _achieved_tflops(scenario, efficiency: Efficiency) -> float:
    p = _plan(scenario, efficiency)
    arch = scenario.architecture()
    s, layers, h, v = scenario.sequence_length, arch.num_layers, arch.hidden_size, arch.vocab_size
    flops = 96 * scenario.global_batch_size * s * layers * h * h * (1 + s / (6 * h) + v / (16 * layers * h))
    return flops / p.performance.step_seconds / scenario.num_gpus / 1e12


# ---------------------------------------------------------------------------------------------
# serving rows (published vllm bench serve / NIM runs) through the traffic simulator

SERVING_MODELS = {
    "Qwen/Qwen3-0.6B": "qwen3-0.6b",
    "Qwen/Qwen3-8B": "qwen3-8b",
    "Qwen/Qwen3-32B": "qwen3-32b",
    "Qwen/Qwen3-235B-A22B-Instruct-2507": "qwen3-235b-a22b",
    "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8": "qwen3-235b-a22b",
    "Qwen/Qwen2.5-0.5B-Instruct": "qwen2.5-0.5b",
    "deepseek-ai/DeepSeek-R1-0528": "deepseek-r1",
    "openai/gpt-oss-20b": "gpt-oss-20b",
    "meta/llama-3.3-70b-instruct": "llama-3.3-70b",
    # the catalog's models under their published Hugging Face ids (the checkpoints the catalog configs describe)
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "meta-llama/Meta-Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "meta-llama/Llama-3.1-70B-Instruct": "llama-3.1-70b",
    "meta-llama/Meta-Llama-3.1-70B-Instruct": "llama-3.1-70b",
    "meta-llama/Llama-3.3-70B-Instruct": "llama-3.3-70b",
    "meta-llama/Llama-3.1-405B-Instruct": "llama-3.1-405b",
    "deepseek-ai/DeepSeek-V3": "deepseek-v3",
    "deepseek-ai/DeepSeek-V3-0324": "deepseek-v3",
    "deepseek-ai/DeepSeek-R1": "deepseek-r1",
    "Qwen/Qwen3-8B-FP8": "qwen3-8b",
    "Qwen/Qwen3-32B-FP8": "qwen3-32b",
    "Qwen/Qwen3-30B-A3B": "qwen3-30b-a3b",
    "Qwen/Qwen3-30B-A3B-FP8": "qwen3-30b-a3b",
    "Qwen/Qwen3-235B-A22B": "qwen3-235b-a22b",
    "Qwen/Qwen3-235B-A22B-FP8": "qwen3-235b-a22b",
    "Qwen/Qwen2.5-7B-Instruct": "qwen2.5-7b",
    "Qwen/Qwen2.5-32B-Instruct": "qwen2.5-32b",
    "Qwen/Qwen2.5-72B-Instruct": "qwen2.5-72b",
    "mistralai/Mixtral-8x7B-Instruct-v0.1": "mixtral-8x7b",
    "openai/gpt-oss-120b": "gpt-oss-120b",
    "MiniMaxAI/MiniMax-M2.5": "minimax-m2.5",
    "moonshotai/Kimi-K2-Instruct": "kimi-k2",
}
SERVING_GPUS = {
    "H100 80GB SXM": "h100-sxm",
    "H100 80GB PCIe": "h100-pcie",
    "H100 NVL 94GB": "h100-nvl",
    "H200 141GB SXM": "h200",
    "H20 96GB": "h20",
    "B200 180GB SXM": "b200",
    "A100 80GB SXM": "a100-80gb",
    "A100 40GB SXM": "a100-40gb",
    "L4 24GB": "l4",
    "L40S 48GB": "l40s",
    "A10G 24GB": "a10g",
    "RTX 4090 24GB": "rtx-4090",
    "MI300X 192GB": "mi300x",
    "MI325X 256GB": "mi325x",
    "MI355X 288GB": "mi355x",
}
SERVING_METRICS = {  # metric -> (TrafficResult attribute, statistic, scale to the reference's unit, unit)
    "mean_ttft_ms": ("ttft_seconds", "mean", 1e3, "ms"),
    "median_ttft_ms": ("ttft_seconds", "p50", 1e3, "ms"),
    "p99_ttft_ms": ("ttft_seconds", "p99", 1e3, "ms"),
    "mean_tpot_ms": ("tpot_seconds", "mean", 1e3, "ms"),
    "p99_tpot_ms": ("tpot_seconds", "p99", 1e3, "ms"),
    "median_itl_ms": ("itl_seconds", "p50", 1e3, "ms"),
    "request_throughput": ("request_throughput_per_second", None, 1.0, "req/s"),
    "output_throughput": ("output_tokens_per_second", None, 1.0, "tokens/s"),
}
# Engine defaults, stated once. vLLM V1 (>= 0.9), OpenAI server: max_num_seqs 1024 and max_num_batched_tokens 8192
# on GPUs with >= 70 GiB other than A100, else 256 and 2048 (vllm tests/engine/test_arg_utils.py
# ::test_defaults_with_usage_context, UsageContext.OPENAI_API_SERVER); gpu_memory_utilization 0.9; KV cache in
# the model's dtype ("auto": bf16, also for fp8 checkpoints); chunked prefill always on; prefix caching on, but
# random-token prompts share no prefix.
VLLM_LARGE_GPU_BYTES = 70 * 2**30
VLLM_FIRST_V1_DEFAULTS = (0, 9)
# NVIDIA NIM's TensorRT-LLM profile publishes none of these: batch cap 256 and max_num_tokens 8192
# (TensorRT-LLM's default) are assumptions, and the KV share 0.95 is read as the tensorrt-llm runtime's
# free_gpu_memory_fraction like the TensorRT-LLM rows above (KV = fraction x what the profiling peak leaves).
SERVING_READINGS = {
    "vllm": "vLLM V1 defaults (OpenAI server): max_num_seqs 1024 / max_num_batched_tokens 8192 on >= 70 GiB GPUs "
    "other than A100, else 256 / 2048; gpu_memory_utilization 0.9 unless the run sets it; KV in bf16; chunked prefill; "
    "lengths fixed at the stated values (or the measured means where a note says so); Poisson arrivals (seed 0) at a "
    "finite rate, all at t=0 for rate inf; the run's request count and client concurrency; Qwen's own -FP8 releases "
    "served as block-scaled FP8 (fp8_scaling 'block': their model cards' 'fine-grained fp8 quantization with block "
    "size of 128')",
    "vllm-v0": "vLLM V0 defaults of v0.6-v0.7 (runtime vllm@0.6; _vllm_v0_settings): max_num_seqs 256, "
    "max_num_batched_tokens = max(max_model_len, 2048) without chunked prefill, 512 (v0.6) / 2048 (v0.7) with it; "
    "chunked prefill on only for max_model_len > 32K and never for MLA models; gpu_memory_utilization 0.9; KV in "
    "bf16; lengths, rate and client concurrency as for vLLM V1",
    "sglang": "SGLang 0.5 defaults (server_args.py _handle_gpu_memory_settings): chunked_prefill_size by GPU memory "
    "(2048 below 35 GiB, 4096 below 60 GiB, 8192 below 160 GiB, else 16384), mem_fraction_static = (memory - "
    "reserved) / memory, max_running_requests left to the KV pool (read as 4096); runtime sglang (static pool, "
    "overlap scheduler); KV in bf16; lengths, rate and client concurrency as for vLLM",
    "tensorrt-llm": "trtllm-serve defaults (tensorrt_llm/commands/serve.py): max_batch_size 2048, max_num_tokens "
    "8192, kv_cache_free_gpu_memory_fraction 0.9 (runtime tensorrt-llm); KV in bf16; its chunked-prefill-off and "
    "no-evict scheduler are the runtime's to honour; lengths, rate and client concurrency as for vLLM",
    "nim-trtllm": "NIM (TensorRT-LLM, runtime tensorrt-llm): batch cap 256, 8192 tokens per step, "
    "free_gpu_memory_fraction 0.95, fp8 KV "
    "(assumed: the profile's settings are not published); closed loop at the stated concurrency, 10 requests per "
    "client slot",
}


@dataclass(frozen=True)
class ServingRun:
    """One published run: what the simulator needs to replay it (every row of the run shares it)."""

    scenario: InferenceScenario
    traffic: Traffic
    engine: str

    def describe(self) -> str:
        s, t = self.scenario, self.traffic
        rate = "inf" if t.requests_per_second is None else f"{t.requests_per_second:g}/s"
        clients = f", c={t.max_concurrency}" if t.max_concurrency else ""
        return (
            f"{s.model} {s.num_gpus}x{s.gpu} {s.weight_dtype} {s.prompt_tokens}/{s.output_tokens} rate {rate}{clients}"
        )


def _reading_key(run: ServingRun) -> str:
    """Which stated defaults a run was replayed with: its engine's, the V0 engine's for vLLM before 0.8."""
    return "vllm-v0" if run.engine == "vllm" and run.scenario.runtime.startswith("vllm@") else run.engine


def serving_cases(path: Path = SERVING_FILE) -> tuple[list[Case], list[Unmapped]]:
    cases, unmapped = [], []
    for row in _read(path):
        ENGINE_VERSIONS[row["id"]] = row["engine_version"]
        run = _serving_run(row)
        if isinstance(run, str):
            unmapped.append(Unmapped(row["id"], run))
            continue
        _, _, _, unit = SERVING_METRICS[row["metric"]]
        cases.append(
            Case(
                row["id"],
                SERVING,
                f"{run.describe()}: {row['metric']}",
                float(row["value"]),
                unit,
                lambda eff, r=run, m=row["metric"]: _serving_metric(r, m, eff),
                SERVING_READINGS[_reading_key(run)],
                row["id"],
                metric=row["metric"],
                group=_serving_group(run),
                run=run,
                publisher=serving_source(row),
                regime=serving_regime(run),
            )
        )
    return cases, unmapped


# ---------------------------------------------------------------------------------------------
# who published a row, and which deployment regime it is in

SOURCE_RULE = (
    "A source is one independent publisher's benchmark effort, derived from the row's first `source` URL: "
    "a GitHub repository (`owner/repo`, one source however many files and commits it spans; `raw.githubusercontent"
    ".com` and `owner.github.io/repo` read the same); a GitHub issue, pull request or discussion is its own source "
    "(`owner/repo#N`: a different author each time); on hosts that carry many publishers (Hugging Face, Medium, "
    "gists) the first path segment names the publisher; anywhere else the host without `www.`. A row's notes can "
    "override this with `source_group=NAME` (for a publisher whose runs sit on several hosts)."
)
SOURCE_GROUP_NOTE = re.compile(r"\bsource_group=([^\s;,]+)")
MULTI_PUBLISHER_HOSTS = {"huggingface.co", "medium.com", "gist.github.com", "substack.com", "dev.to"}
HF_SECTIONS = {"datasets", "spaces", "blog", "papers", "docs"}  # huggingface.co/<section>/<owner>/...


def serving_source(row: dict) -> str:
    """The independent source (publisher and benchmark effort) of a serving row: SOURCE_RULE."""
    override = SOURCE_GROUP_NOTE.search(row.get("notes") or "")
    if override:
        return override.group(1)
    url = re.split(r"\s*;\s*|\s+", row["source"].strip())[0]
    parsed = urlsplit(url)
    host = parsed.netloc.lower().removeprefix("www.")
    parts = [p for p in parsed.path.split("/") if p]
    if host in ("github.com", "raw.githubusercontent.com") and len(parts) >= 2:
        name = f"{parts[0]}/{parts[1]}".lower()
        if host == "github.com" and len(parts) >= 4 and parts[2] in ("issues", "pull", "discussions"):
            return f"{name}#{parts[3]}"
        return name
    if host.endswith(".github.io"):
        owner = host.removesuffix(".github.io")
        return f"{owner}/{parts[0].lower()}" if parts else owner
    if host in MULTI_PUBLISHER_HOSTS and parts:
        if host == "huggingface.co" and parts[0] in HF_SECTIONS and len(parts) >= 2 and parts[0] != "blog":
            return f"{host}/{parts[1].lower()}"
        return f"{host}/{parts[0].lower()}"
    return host


def serving_regime(run: ServingRun) -> str:
    """dense/MoE x one GPU/several x NVIDIA/AMD x engine: one label per run, from its own settings
    (planner.uncertainty.serving_regime: the label a plan's traffic ranges are read by)."""
    s = run.scenario
    return regime_label(s.architecture().is_moe, s.tensor_parallel, get_accelerator(s.gpu).vendor, run.engine)


SERVING_GROUPS = {  # regime -> what the report says about it
    "short-request flood": "hundreds of requests of a few output tokens sent at once",
    "light load": "a few requests in flight (client concurrency <= 8, or a finite Poisson rate below capacity)",
    "MoE, loaded": "mixture-of-experts models with tens to hundreds of requests in flight",
    "dense, loaded": "dense models with tens to hundreds of requests in flight",
}


def _serving_group(run: ServingRun) -> str:
    """The run's load regime (one rule for every row, from the run's own settings)."""
    traffic, scenario = run.traffic, run.scenario
    if scenario.output_tokens <= 8:
        return "short-request flood"
    clients = traffic.max_concurrency or traffic.num_requests
    if clients <= 8 or traffic.requests_per_second is not None:
        return "light load"
    return "MoE, loaded" if scenario.architecture().is_moe else "dense, loaded"


def _serving_run(row: dict) -> ServingRun | str:
    """The row's run, or why it cannot be replayed."""
    model, gpu = SERVING_MODELS.get(row["model"]), SERVING_GPUS.get(row["gpu"])
    if model is None:
        return f"model '{row['model']}' is not in the catalog"
    if gpu is None:
        return f"GPU '{row['gpu']}' is not in the catalog"
    if row["metric"] not in SERVING_METRICS:
        return f"metric '{row['metric']}' has no simulated counterpart"
    if row["dtype"] not in DTYPES:
        return f"weight format '{row['dtype']}' is not one the engine models yet ({', '.join(DTYPES)})"
    engine = row["engine"]
    settings = _engine_settings(engine, row["engine_version"], gpu, int(row["tp"]))
    if isinstance(settings, str):
        return settings
    for item in filter(None, row["engine_args"].split(";")):
        key, _, value = item.partition("=")
        settings[ENGINE_ARG_NAMES.get(key.strip(), key.strip())] = value.strip()
    if "chunked_prefill_tokens" in settings:  # a V0 run: its step budget follows max_model_len and chunking
        _v0_step_tokens(settings, model)
    tp, gpus = int(row["tp"]), int(row["num_gpus"])
    rate = row["request_rate"].strip().lower()
    try:
        scenario = InferenceScenario(
            model=model,
            gpu=gpu,
            num_gpus=gpus,
            tensor_parallel=tp,
            weight_dtype=row["dtype"],
            kv_cache_dtype=settings["kv_cache_dtype"],
            prompt_tokens=int(row["input_len"]),
            output_tokens=int(row["output_len"]),
            concurrency=int(settings["max_num_seqs"]) * (gpus // tp),
            gpu_memory_utilization=float(settings["gpu_memory_utilization"]),
            prefill_chunk_tokens=int(settings["max_num_batched_tokens"]),
            runtime=settings.get("runtime") or _runtime_of(engine),
            fp8_scaling=_fp8_scaling_of(row["model"], row["dtype"]),
        )
        traffic = Traffic(
            requests_per_second=None if rate == "inf" else float(rate),
            num_requests=int(row["num_prompts"]),
            max_concurrency=int(row["max_concurrency"]) if row["max_concurrency"] else None,
            seed=0,
            **({"chunked_prefill": settings["chunked_prefill"]} if "chunked_prefill" in settings else {}),
        )
    except (PlanningError, ValueError, KeyError) as exc:
        return f"scenario rejected: {' '.join(str(exc).split())}"
    return ServingRun(scenario, traffic, engine)


# A row's engine_args may name a setting as its engine does; each maps to the scenario field it stands for.
ENGINE_ARG_NAMES = {
    "max_running_requests": "max_num_seqs",  # SGLang
    "chunked_prefill_size": "max_num_batched_tokens",  # SGLang
    "mem_fraction_static": "gpu_memory_utilization",  # SGLang (the sglang runtime reads it as its static share)
    "max_batch_size": "max_num_seqs",  # TensorRT-LLM
    "max_num_tokens": "max_num_batched_tokens",  # TensorRT-LLM
    "enable_chunked_prefill": "chunked_prefill",
    "kv_cache_free_gpu_memory_fraction": "gpu_memory_utilization",  # TensorRT-LLM (free_fraction budget)
    "free_gpu_memory_fraction": "gpu_memory_utilization",
}


def _version(text: str) -> tuple[int, ...] | None:
    match = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
    return tuple(int(g) for g in match.groups() if g is not None) if match else None


def _engine_settings(engine: str, version_text: str, gpu: str, tp: int) -> dict | str:
    """The engine's documented defaults for this GPU (SERVING_READINGS says where each comes from), or why the
    row's engine and version have none stated here."""
    version = _version(version_text)
    if engine == "vllm":
        if version is not None and VLLM_V0_DEFAULTS[0] <= version[:2] < VLLM_V0_DEFAULTS[1]:
            return _vllm_v0_settings(version_text, version)
        if version is None or version[:2] < VLLM_FIRST_V1_DEFAULTS:
            return _vllm_v0_reason(version_text)
        large = get_accelerator(gpu).memory_bytes >= VLLM_LARGE_GPU_BYTES and not gpu.startswith("a100")
        return {
            "max_num_seqs": 1024 if large else 256,
            "max_num_batched_tokens": 8192 if large else 2048,
            "gpu_memory_utilization": 0.9,
            "kv_cache_dtype": "bf16",
        }
    if engine == "sglang":
        if version is None or version[:2] < SGLANG_FIRST_MEMORY_HEURISTICS:
            return (
                f"SGLang version '{version_text}': the defaults stated here (chunked_prefill_size and "
                "mem_fraction_static from the GPU's memory) are the 0.5 releases'; earlier ones set them by "
                "tensor-parallel size and are not read yet"
            )
        return {**sglang_defaults(get_accelerator(gpu).memory_bytes, tp), "kv_cache_dtype": "bf16"}
    if engine == "tensorrt-llm":
        if version is None or version[:2] < TRTLLM_FIRST_PYTORCH_DEFAULTS:
            return (
                f"TensorRT-LLM version '{version_text}': a TensorRT-engine release, whose batch and token limits "
                "are build settings the row does not give"
            )
        return dict(TRTLLM_SERVE_DEFAULTS)
    if engine == "nim-trtllm":
        return {}  # every setting is in the row's engine_args (see SERVING_READINGS)
    return f"engine '{engine}' has no stated defaults"


# vLLM's V0 engine as the OpenAI server ran it in v0.6-v0.7 (V1 became the default in v0.8, whose defaults before
# 0.9's GPU-size rule are not stated here): max_num_seqs 256 (vllm/engine/arg_utils.py); SchedulerConfig
# (vllm/config.py): max_num_batched_tokens = max(max_model_len, 2048) with chunked prefill off, 512 with it on
# (v0.5-v0.6; v0.7 raised the OpenAI server's to 2048); chunked prefill on by default only for max_model_len > 32K
# (arg_utils create_engine_config, the long-context rule) and forced off for MLA models (vLLM PR #13374; the
# runtime's scheduler policy applies it). max_model_len is the model's context unless the row's engine_args set it.
VLLM_V0_DEFAULTS = ((0, 6), (0, 8))  # [first, end) of the releases read as the V0 engine with these defaults
VLLM_V0_LONG_CONTEXT = 32 * 1024


def _vllm_v0_settings(version_text: str, version: tuple[int, ...]) -> dict | str:
    """Settings of a V0 run (the rule above), or why it cannot be replayed (no versioned runtime yet)."""
    if resolve_runtime is None:
        return _vllm_v0_reason(version_text)
    try:
        runtime = str(resolve_runtime(f"vllm@{'.'.join(map(str, version))}"))
    except ValueError as exc:
        return f"vLLM version '{version_text}': {exc}"
    return {
        "max_num_seqs": 256,
        "max_num_batched_tokens": None,  # from max_model_len and chunked prefill: _v0_step_tokens
        "chunked_prefill_tokens": 512 if version[:2] < (0, 7) else 2048,
        "gpu_memory_utilization": 0.9,
        "kv_cache_dtype": "bf16",
        "runtime": runtime,
    }


def _v0_step_tokens(settings: dict, model: str) -> None:
    """A V0 run's chunked prefill and step budget from its max_model_len (the rule above VLLM_V0_DEFAULTS)."""
    arch = InferenceScenario(model=model, gpu="h100-sxm").architecture()
    max_model_len = int(settings.get("max_model_len") or arch.max_context_tokens)
    if "chunked_prefill" not in settings:
        settings["chunked_prefill"] = max_model_len > VLLM_V0_LONG_CONTEXT and not arch.uses_mla
    chunked = str(settings["chunked_prefill"]).lower() in ("1", "true", "yes")
    settings["chunked_prefill"] = chunked
    if settings.get("max_num_batched_tokens") is None:
        settings["max_num_batched_tokens"] = settings["chunked_prefill_tokens"] if chunked else max(max_model_len, 2048)


def _vllm_v0_reason(version_text: str) -> str:
    """Why a vLLM row before 0.9 is not replayed: its release's defaults or scheduler are not stated here."""
    version = _version(version_text)
    if version is None:
        return (
            f"vLLM version '{version_text}': the engine's defaults depend on the release, which the row does not give"
        )
    if resolve_runtime is None:
        return (
            f"vLLM version '{version_text}': the V0 engine (before 0.9; max_num_seqs 256, max_num_batched_tokens = "
            "max_model_len without chunked prefill, 512/2048 with it); its scheduler needs a versioned runtime "
            "('vllm@0.7.3'), not in planner/physics/runtimes.py yet"
        )
    if version[:2] >= VLLM_V0_DEFAULTS[1]:
        return (
            f"vLLM version '{version_text}': the V1 engine with the defaults before 0.9's GPU-size rule "
            "(max_num_seqs / max_num_batched_tokens of 0.8.x), not stated here"
        )
    return f"vLLM version '{version_text}': releases before 0.6 (their server defaults) are not stated here"


# SGLang 0.5 (sgl-project/sglang python/sglang/srt/server_args.py ServerArgs._handle_gpu_memory_settings, read in
# the BBuf/sglang@261ffecd0b13 copy of the file): chunked_prefill_size and cuda_graph_max_bs by the GPU's memory
# (MiB, get_device_memory_capacity), then mem_fraction_static = (memory - reserved) / memory with
# reserved = 512 + 1.5 x max(chunked_prefill_size, 2048) + 2 x cuda_graph_max_bs + tp x pp / 8 x 1024 MiB, at
# least 10 GiB on GPUs over 60 GiB. max_running_requests unset: the scheduler derives it from the KV pool, so the
# pool binds; read here as 4096 request slots (an upper bound stated as an assumption).
SGLANG_FIRST_MEMORY_HEURISTICS = (0, 5)
SGLANG_MEMORY_TIERS_MIB = (  # (below this much memory, chunked_prefill_size, cuda_graph_max_bs tp<4, tp>=4)
    (20 * 1024, 2048, 8, 8),
    (35 * 1024, 2048, 24, 80),
    (60 * 1024, 4096, 32, 160),
    (90 * 1024, 8192, 256, 512),
    (160 * 1024, 8192, 256, 512),
    (math.inf, 16384, 512, 512),
)
SGLANG_RUNNING_REQUESTS = 4096


def sglang_defaults(memory_bytes: float, tp: int) -> dict:
    """SGLang 0.5's chunked_prefill_size and mem_fraction_static for a GPU of this memory at this TP (pp 1)."""
    memory_mib = memory_bytes / 2**20
    chunk, graph_small, graph_large = next(t[1:] for t in SGLANG_MEMORY_TIERS_MIB if memory_mib < t[0])
    graph = graph_small if tp < 4 else graph_large
    reserved = 512 + 1.5 * max(chunk, 2048) + 2 * graph + tp / 8 * 1024
    if memory_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return {
        "max_num_seqs": SGLANG_RUNNING_REQUESTS,
        "max_num_batched_tokens": chunk,
        "gpu_memory_utilization": round((memory_mib - reserved) / memory_mib, 3),
    }


# trtllm-serve (NVIDIA/TensorRT-LLM@4c05a74891e4 tensorrt_llm/commands/serve.py): max_batch_size and max_num_tokens
# default to BuildConfig's (2048 and 8192, as `trtllm-serve --help` prints them in the 0.2x-1.x releases),
# kv_cache_free_gpu_memory_fraction 0.9, the PyTorch backend, chunked prefill off, the GUARANTEED_NO_EVICT capacity
# scheduler. The first releases whose trtllm-serve defaults to the PyTorch backend: 0.20 (read as such).
TRTLLM_FIRST_PYTORCH_DEFAULTS = (0, 20)
TRTLLM_SERVE_DEFAULTS = {
    "max_num_seqs": 2048,
    "max_num_batched_tokens": 8192,
    "gpu_memory_utilization": 0.9,
    "kv_cache_dtype": "bf16",
    "runtime": "tensorrt-llm",
}


def _fp8_scaling_of(model: str, dtype: str) -> str | None:
    """The published checkpoint's FP8 scaling where the catalog model is its BF16 parent: Qwen's own -FP8 releases
    are block-scaled (128 x 128); every other row keeps the checkpoint's own reading (`fp8_scaling` None)."""
    return "block" if dtype == "fp8" and model.startswith("Qwen/") and model.endswith("-FP8") else None


_SIMULATED: dict[tuple[ServingRun, str], object] = {}  # one simulation per run and efficiency, shared by its rows


def _serving_metric(run: ServingRun, metric: str, efficiency: Efficiency) -> float:
    key = (run, efficiency.model_dump_json())
    result = _SIMULATED.get(key)
    if result is None:
        calibration = None if efficiency == DEFAULT_EFFICIENCY else Calibration(efficiency)
        result = TrafficEngine.of(run.scenario, calibration, run.traffic).simulate()
        _SIMULATED[key] = result
    attribute, statistic, scale, _ = SERVING_METRICS[metric]
    value = getattr(result, attribute)
    return float(getattr(value, statistic) if statistic else value) * scale


# ---------------------------------------------------------------------------------------------


@dataclass
class Result:
    case: Case
    predicted: float
    error: float = field(init=False)

    def __post_init__(self):
        self.error = (self.predicted - self.case.reference) / self.case.reference


def evaluate(cases: list[Case], efficiency: Efficiency = DEFAULT_EFFICIENCY) -> list[Result]:
    return [Result(case, float(case.predict(efficiency))) for case in cases]


def summarize(results: list[Result]) -> dict[str, dict]:
    summary = {}
    for family in FAMILIES:
        errors = [r.error for r in results if r.case.family == family and math.isfinite(r.error)]
        if not errors:
            continue
        absolute = sorted(abs(e) for e in errors)
        signed = sorted(errors)
        summary[family] = {
            "cases": len(errors),
            "median_abs_error": statistics.median(absolute),
            "p90_abs_error": _quantile(absolute, 0.9),
            "median_signed_error": statistics.median(errors),
            "p10_signed_error": _quantile(signed, 0.1),
            "p90_signed_error": _quantile(signed, 0.9),
            "max_abs_error": absolute[-1],
            "band": band_summary(errors),
        }
    return summary


def _stats(errors: list[float]) -> dict:
    absolute = sorted(abs(e) for e in errors)
    return {
        "cases": len(errors),
        "median_abs_error": statistics.median(absolute),
        "p90_abs_error": _quantile(absolute, 0.9),
        "median_signed_error": statistics.median(errors),
        "max_abs_error": absolute[-1],
    }


SERVING_METRIC_KINDS = {"TTFT": ("ttft",), "TPOT / ITL": ("tpot", "itl"), "throughput": ("throughput",)}


def summarize_serving(results: list[Result]) -> dict:
    """The serving family's spread, overall and per metric, per load regime and metric kind, per run."""
    serving = [r for r in results if r.case.family == SERVING and math.isfinite(r.error)]
    if not serving:
        return {}
    metrics = dict.fromkeys(m for m in SERVING_METRICS if any(r.case.metric == m for r in serving))
    groups = {}
    for group in SERVING_GROUPS:
        kinds = {}
        for kind, words in SERVING_METRIC_KINDS.items():
            errors = [r.error for r in serving if r.case.group == group and any(w in r.case.metric for w in words)]
            if errors:
                kinds[kind] = _stats(errors)
        if kinds:
            groups[group] = kinds
    runs: dict[str, dict[str, float]] = {}
    for r in serving:
        runs.setdefault(_run_name(r), {})[r.case.metric] = r.error
    return {
        **_stats([r.error for r in serving]),
        # Left out one run at a time: a run's metrics share its setup and miss together.
        "band": band_summary([r.error for r in serving], [_run_name(r) for r in serving]),
        "metrics": {m: _stats([r.error for r in serving if r.case.metric == m]) for m in metrics},
        "groups": groups,
        "runs": runs,
        "headline": headline(serving),
        "sources": {name: _source_stats(rs) for name, rs in _by(serving, lambda r: r.case.publisher).items()},
        "regimes": {name: _source_stats(rs) for name, rs in sorted(_by(serving, lambda r: r.case.regime).items())},
        "ranges": traffic_ranges(serving),
    }


def _range_stats(results: list[Result]) -> dict:
    """One traffic range: the band of these statistics' signed errors, checked by leaving each source out (every
    statistic of that source at once: a plan's deployment is one no source measured)."""
    return {
        "cases": len(results),
        "sources": len({r.case.publisher for r in results}),
        "band": band_summary([r.error for r in results], [r.case.publisher for r in results]),
    }


def traffic_ranges(serving: list[Result]) -> dict:
    """Per metric kind (planner.uncertainty.TRAFFIC_RANGE_KINDS), every regime pooled and each regime alone: the
    likely ranges a traffic answer carries (planner.uncertainty.traffic_range picks one)."""
    ranges = {}
    for kind, words in TRAFFIC_RANGE_KINDS.items():
        chosen = [r for r in serving if any(w in r.case.metric for w in words)]
        if not chosen:
            continue
        by_regime = _by(chosen, lambda r: r.case.regime)
        ranges[kind] = {
            "all": _range_stats(chosen),
            "regimes": {name: _range_stats(rs) for name, rs in sorted(by_regime.items())},
        }
    return ranges


# The headline statistics: each is read per run from the first metric of its tuple the run publishes. A run that
# publishes request throughput but not output throughput is read from the former: with fixed output lengths (every
# replayed run) the two differ by the same factor measured and simulated, so the relative error is the same.
HEADLINE_METRICS = {
    "mean_ttft_ms": ("mean TTFT", ("mean_ttft_ms",)),
    "mean_tpot_ms": ("mean TPOT", ("mean_tpot_ms",)),
    "output_throughput": ("output throughput", ("output_throughput", "request_throughput")),
}


def _by(results: list[Result], key: Callable[[Result], str]) -> dict[str, list[Result]]:
    groups: dict[str, list[Result]] = {}
    for r in results:
        groups.setdefault(key(r), []).append(r)
    return groups


def headline_errors(results: list[Result], metric: str) -> list[Result]:
    """The results a headline metric reads: per run (source and run), the first of its metrics that run has."""
    _, metrics = HEADLINE_METRICS[metric]
    chosen = []
    for rs in _by(results, lambda r: f"{r.case.publisher}|{_run_name(r)}").values():
        by_metric = {r.case.metric: r for r in rs}
        first = next((by_metric[m] for m in metrics if m in by_metric), None)
        if first is not None:
            chosen.append(first)
    return chosen


def source_medians(results: list[Result], metric: str | None = None) -> dict[str, float]:
    """Source -> its median |error| over its headline results for `metric` (None: over all its serving results)."""
    chosen = results if metric is None else headline_errors(results, metric)
    return {name: statistics.median(abs(r.error) for r in rs) for name, rs in _by(chosen, _publisher).items()}


def _publisher(r: Result) -> str:
    return r.case.publisher


def over_sources(medians: dict[str, float]) -> float:
    """The median over sources of each source's median |error| (each source counts once, however many rows)."""
    return statistics.median(medians.values()) if medians else math.nan


def headline(results: list[Result]) -> dict[str, dict]:
    """Per headline metric: the median over sources, the pooled median over runs, and both with each source left
    out (so no figure rests on one source)."""
    out = {}
    for metric in HEADLINE_METRICS:
        chosen = headline_errors(results, metric)
        if not chosen:
            continue
        medians = source_medians(chosen, None)
        loo = {}
        for left in medians:
            rest = [r for r in chosen if r.case.publisher != left]
            loo[left] = {
                "over_sources": over_sources({k: v for k, v in medians.items() if k != left}),
                "pooled": statistics.median(abs(r.error) for r in rest) if rest else math.nan,
            }
        finite = [v["over_sources"] for v in loo.values() if math.isfinite(v["over_sources"])]
        out[metric] = {
            "label": HEADLINE_METRICS[metric][0],
            "sources": len(medians),
            "runs": len(chosen),
            "over_sources": over_sources(medians),
            "pooled": statistics.median(abs(r.error) for r in chosen),
            "median_signed_error": statistics.median(r.error for r in chosen),
            "source_medians": medians,
            "leave_one_source_out": loo,
            "loo_min": min(finite) if finite else math.nan,
            "loo_max": max(finite) if finite else math.nan,
        }
    return out


def _source_stats(results: list[Result]) -> dict:
    """One source's (or regime's) runs, statistics and errors per metric kind and per headline metric."""
    kinds = {}
    for kind, words in SERVING_METRIC_KINDS.items():
        errors = [r.error for r in results if any(w in r.case.metric for w in words)]
        if errors:
            kinds[kind] = _stats(errors)
    heads = {}
    for metric in HEADLINE_METRICS:
        chosen = headline_errors(results, metric)
        if chosen:
            heads[metric] = {
                "runs": len(chosen),
                "median_abs_error": statistics.median(abs(r.error) for r in chosen),
                "median_signed_error": statistics.median(r.error for r in chosen),
            }
    return {
        "runs": len({f"{r.case.publisher}|{_run_name(r)}" for r in results}),
        "statistics": len(results),
        "sources": sorted({r.case.publisher for r in results}),
        "regimes": sorted({r.case.regime for r in results}),
        "engines": sorted({f"{r.case.run.engine} {_engine_version(r)}" for r in results if r.case.run}),
        "kinds": kinds,
        "headline": heads,
    }


def _engine_version(r: Result) -> str:
    return ENGINE_VERSIONS.get(r.case.source, "")


ENGINE_VERSIONS: dict[str, str] = {}  # serving row id -> its engine_version (filled by serving_cases)


def _run_name(r: Result) -> str:
    return r.case.description.rsplit(": ", 1)[0]


def read_ceilings(path: Path = CEILINGS_FILE) -> dict[str, float]:
    """Family -> the committed ceiling on its median |error| (a fraction)."""
    return {k: float(v) for k, v in json.loads(path.read_text())["median_abs_error_ceiling"].items()}


def read_source_ceilings(path: Path = CEILINGS_FILE) -> dict[str, float]:
    """Serving headline metric -> the committed ceiling on its median over sources (a fraction)."""
    return {k: float(v) for k, v in json.loads(path.read_text())["median_over_sources_ceiling"].items()}


def ceiling_breaches(
    summary: dict, serving: dict, ceilings: dict[str, float], source_ceilings: dict[str, float] | None = None
) -> list[str]:
    """One sentence per family whose median |error| is above its committed ceiling, or that has no ceiling; with
    `source_ceilings`, the same for each serving headline metric's median over sources."""
    breaches = []
    for metric, h in (serving or {}).get("headline", {}).items() if source_ceilings is not None else ():
        ceiling, value = source_ceilings.get(metric), h["over_sources"]
        if ceiling is None:
            breaches.append(
                f"{SERVING} {metric}: median over sources {100 * value:.2f}% has no ceiling in {CEILINGS_FILE.name}"
            )
        elif value > ceiling:
            breaches.append(
                f"{SERVING} {metric}: median over sources {100 * value:.2f}% is above its committed ceiling "
                f"{100 * ceiling:.2f}% ({CEILINGS_FILE.relative_to(ROOT)}); accuracy regressed"
            )
    medians = {family: s["median_abs_error"] for family, s in summary.items()}
    if serving:
        medians[SERVING] = serving["median_abs_error"]
    for family, median in medians.items():
        ceiling = ceilings.get(family)
        if ceiling is None:
            breaches.append(f"{family}: median |error| {100 * median:.2f}% has no ceiling in {CEILINGS_FILE.name}")
        elif median > ceiling:
            breaches.append(
                f"{family}: median |error| {100 * median:.2f}% is above its committed ceiling {100 * ceiling:.2f}% "
                f"({CEILINGS_FILE.relative_to(ROOT)}); accuracy regressed"
            )
    return breaches


def _quantile(ordered: list[float], q: float) -> float:
    """Nearest-rank quantile (with 2 cases, p10 and p90 are the extremes)."""
    rank = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[rank]


def collect(reference: Path, serving: Path = SERVING_FILE) -> tuple[list[Case], list[Unmapped]]:
    memory, m_unmapped = memory_cases(_read(reference / "memory_measured.csv"))
    throughput_rows = _read(reference / "throughput_measured.csv")
    inference, i_unmapped = inference_cases(throughput_rows)
    training, t_unmapped = training_cases(throughput_rows)
    runs, s_unmapped = serving_cases(serving)
    return memory + inference + training + runs, m_unmapped + i_unmapped + t_unmapped + s_unmapped


def write_report(
    results: list[Result],
    unmapped: list[Unmapped],
    summary: dict,
    out: Path,
    sensitivity: list[tuple[str, dict]] | None = None,
    serving: dict | None = None,
    mechanisms: list[tuple[str, dict[str, float]]] | None = None,
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with (out / "report.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["case", "family", "description", "reference", "predicted", "unit", "error_percent", "reading"])
        for r in results:
            writer.writerow(
                [
                    r.case.case_id,
                    r.case.family,
                    r.case.description,
                    f"{r.case.reference:.6g}",
                    f"{r.predicted:.6g}",
                    r.case.unit,
                    f"{100 * r.error:+.1f}",
                    r.case.reading,
                ]
            )
    lines = [
        "# Accuracy against published measurements",
        "",
        "Generated by `.venv/bin/python benchmarks/accuracy.py --sensitivity`; do not edit by hand.",
        "Efficiencies are the documented defaults (`planner/physics/efficiency.py: Efficiency`, scaled by GPU generation and GEMM shape in `planner/physics/gemm_efficiency.py`), identical for every case.",
        "",
        "## Summary per family",
        "",
        "| family | cases | median abs error | p90 abs error | median signed error | worst |",
        "|---|---|---|---|---|---|",
    ]
    for family, s in summary.items():
        lines.append(
            f"| {family} | {s['cases']} | {100 * s['median_abs_error']:.1f}% | {100 * s['p90_abs_error']:.1f}% "
            f"| {100 * s['median_signed_error']:+.1f}% | {100 * s['max_abs_error']:.1f}% |"
        )
    if serving:
        lines.append(
            f"| {SERVING} (all metrics; see below) | {serving['cases']} | {100 * serving['median_abs_error']:.1f}% "
            f"| {100 * serving['p90_abs_error']:.1f}% | {100 * serving['median_signed_error']:+.1f}% "
            f"| {100 * serving['max_abs_error']:.1f}% |"
        )
        lines += ["", f"Error bands (`planner/uncertainty.py`) read the families above the `{SERVING}` row only."]
        if serving.get("headline"):
            lines += [
                "",
                "Serving headline, median over sources (each source's median |error|; pooled over runs beside it; "
                "the range with each source left out): "
                + "; ".join(
                    f"{h['label']} {100 * h['over_sources']:.1f}% over {h['sources']} sources "
                    f"(pooled {100 * h['pooled']:.1f}%, one left out {100 * h['loo_min']:.1f}-{100 * h['loo_max']:.1f}%)"
                    for h in serving["headline"].values()
                )
                + ". Details under the serving family below.",
            ]
    lines += _bands_section(summary, serving)
    lines += _ranges_section(serving or {})
    lines += accuracy_decisions.report_lines((serving or {}).get("decisions"))
    lines += ["", "## Worst cases", ""]
    for r in sorted((r for r in results if r.case.family != SERVING), key=lambda r: -abs(r.error))[:5]:
        lines.append(
            f"- **{r.case.case_id}** ({r.case.family}) {r.case.description}: reference "
            f"{r.case.reference:.4g} {r.case.unit}, predicted {r.predicted:.4g} ({100 * r.error:+.1f}%)"
        )
    if serving:
        lines += _serving_section(results, serving)
    lines += [
        "",
        "## Every case",
        "",
        "| case | family | description | reference | predicted | error |",
        "|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.case.case_id} | {r.case.family} | {r.case.description} | {r.case.reference:.4g} "
            f"{r.case.unit} | {r.predicted:.4g} | {100 * r.error:+.1f}% |"
        )
    lines += ["", "## Readings chosen where a source is ambiguous", ""]
    for reading in dict.fromkeys(f"{r.case.family}: {r.case.reading}" for r in results):
        lines.append(f"- {reading}")
    lines += ["", "## Rows not mapped", "", "| row | reason |", "|---|---|"]
    lines += [f"| {u.row_id} | {u.reason} |" for u in unmapped]
    if sensitivity:
        lines += [
            "",
            "## Sensitivity: median signed error when one default moves",
            "",
            "| change | " + " | ".join(summary) + " |",
            "|---|" + "---|" * len(summary),
        ]
        for label, s in sensitivity:
            cells = [f"{100 * s[f]['median_signed_error']:+.1f}%" if f in s else "" for f in summary]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    if mechanisms:
        families = [f for f in mechanisms[0][1] if " without " not in f]
        lines += [
            "",
            "## What each mechanism buys: median |error| with it switched off",
            "",
            "Every case re-planned with one mechanism off and everything else as in the report (a what-if: the "
            "mechanism's module function or efficiency figures replaced for that run only). The row above is what "
            "the report shows; a row below it that is worse is what that mechanism bought. Runtimes' memory "
            "accounting and the alpha-beta collectives' ring/tree latencies cannot be switched off this way.",
            "",
            "| | " + " | ".join(families) + " |",
            "|---|" + "---|" * len(families),
        ]
        for label, medians in mechanisms:
            cells = [f"{100 * medians[f]:.1f}%" if f in medians else "" for f in families]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines += _mechanism_loso_section(mechanisms)
    (out / "report.md").write_text("\n".join(lines) + "\n")


def _mechanism_loso_section(mechanisms: list[tuple[str, dict[str, float]]]) -> list[str]:
    """What each mechanism buys on the serving figure over sources, and the same with each source left out: a
    mechanism whose gain one source carries shows a range that reaches zero."""
    on = mechanisms[0][1]
    if SERVING_OVER_SOURCES not in on:
        return []
    prefix = f"{SERVING_OVER_SOURCES} without "
    sources = [k.removeprefix(prefix) for k in on if k.startswith(prefix)]
    lines = [
        "",
        "Each mechanism's gain on the serving median over sources (with it off minus with it on, percentage points; "
        "positive: the mechanism helps), with every source in and with each source left out in turn (the range over "
        "those leave-one-source-out figures, and the source whose absence moves the gain most):",
        "",
        "| mechanism | gain, all sources | gain, one source left out (min … max) | moved most by leaving out |",
        "|---|---|---|---|",
    ]
    for label, medians in mechanisms[1:]:
        gain = medians[SERVING_OVER_SOURCES] - on[SERVING_OVER_SOURCES]
        loo = {s: medians.get(prefix + s, math.nan) - on.get(prefix + s, math.nan) for s in sources}
        finite = {s: g for s, g in loo.items() if math.isfinite(g)}
        if not finite:
            continue
        mover = max(finite, key=lambda s: abs(finite[s] - gain))
        lines.append(
            f"| {label.removeprefix('without ')} | {100 * gain:+.1f} | {100 * min(finite.values()):+.1f} … "
            f"{100 * max(finite.values()):+.1f} | {mover} ({100 * finite[mover]:+.1f}) |"
        )
    return lines


def _bands_section(summary: dict, serving: dict | None) -> list[str]:
    lines = [
        "",
        "## Error bands: promised and achieved coverage",
        "",
        "A band promises to hold the measured value for 80 % of a family's cases. Its edges are signed errors "
        "e_lo..e_hi from all the family's cases (`planner.uncertainty.band_edges`: split-conformal ranks; "
        "symmetric with 4-8 cases; at least +-50 % with 3 or fewer), and around a prediction P it is "
        "[P / (1 + e_hi), P / (1 + e_lo)]. *Held when left out*: for each case, the band built from the other "
        "cases, and whether that case's measured value fell inside it.",
        "",
        "| family | cases | band (signed error) | rule | promised | held when left out | note |",
        "|---|---|---|---|---|---|---|",
    ]
    rows = list(summary.items()) + ([(SERVING, serving)] if serving else [])
    for family, s in rows:
        b = s["band"]
        notes = coverage_notes(b)
        if family == SERVING:
            notes.insert(0, "wide: the traffic simulator's TTFT, TPOT and throughput pooled; no plan number carries it")
        lines.append(
            f"| {family} | {s['cases']} | {100 * b['low_error']:+.1f}% … {100 * b['high_error']:+.1f}% | {b['rule']} "
            f"| {100 * b['promised_coverage']:.0f}% | {b['loo_held']} of {b['loo_cases']} "
            f"({100 * b['loo_coverage']:.0f}%, each {b['loo_by']} left out) | {'; '.join(notes)} |"
        )
    return lines


def _ranges_section(serving: dict) -> list[str]:
    """The likely ranges traffic answers carry (planner.inference.traffic_ranges), with their out-of-source check."""
    ranges = serving.get("ranges", {})
    if not ranges:
        return []
    lines = [
        "",
        "## Likely ranges of traffic answers (out of source)",
        "",
        "Every traffic answer (latency statistics, rates, SLO verdicts, replicas for a rate) carries the likely range "
        "of its metric kind: the 80 % band of the simulator's signed errors on these published statistics, its "
        "regime's own where runs from at least "
        f"{REGIME_MIN_SOURCES} sources and {REGIME_MIN_CASES} statistics measured it, else every regime's pooled. "
        "*Held with its source left out*: for each statistic, the band built without any statistic of its source, "
        "and whether it held the measured value (a plan's deployment is one no source measured). Where that falls "
        "short of 80 %, the edges are widened to the level that keeps it (`planner.uncertainty.band_summary`).",
        "",
        "| kind | regime | statistics | sources | band (signed error) | level | held with its source left out | plans use it |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for kind, entry in ranges.items():
        rows = [("every regime", entry["all"], True)] + [
            (name, st, regime_range_usable(st)) for name, st in entry["regimes"].items()
        ]
        for name, st, used in rows:
            b = st["band"]
            held = (
                f"{b['loo_held']} of {b['loo_cases']} ({100 * b['loo_coverage']:.0f}%)"
                if st["sources"] > 1
                else "n/a: one source"
            )
            lines.append(
                f"| {kind} | {name} | {st['cases']} | {st['sources']} | {100 * b['low_error']:+.0f}% … "
                f"{100 * b['high_error']:+.0f}% | {100 * b['level']:.0f}% | {held} | {'yes' if used else 'no'} |"
            )
    return lines


def _pct(value: float) -> str:
    return f"{100 * value:+.0f}%"


def _serving_section(results: list[Result], serving: dict) -> list[str]:
    lines = [
        "",
        "## Serving family: published serving runs through the traffic simulator",
        "",
        f"Every row of `{SERVING_FILE.relative_to(ROOT)}` (a published `vllm bench serve` or NVIDIA NIM run: model, "
        "GPUs, lengths, request count, rate or client concurrency, measured value, source and commit) is replayed "
        "with `TrafficEngine.of(scenario, traffic=...).simulate()` under the engine's documented defaults "
        "(readings below). Nothing is fitted to these rows.",
        "",
        "| metric | cases | median abs error | p90 abs error | median signed error | worst |",
        "|---|---|---|---|---|---|",
    ]
    for metric, st in serving["metrics"].items():
        lines.append(
            f"| {metric} | {st['cases']} | {100 * st['median_abs_error']:.1f}% | {100 * st['p90_abs_error']:.1f}% "
            f"| {100 * st['median_signed_error']:+.1f}% | {100 * st['max_abs_error']:.1f}% |"
        )
    lines += _generalisation_section(serving)
    lines += [
        "",
        "Median signed error by load regime (cases in brackets):",
        "",
        "| regime | what it is | TTFT | TPOT / ITL | throughput |",
        "|---|---|---|---|---|",
    ]
    for group, kinds in serving["groups"].items():
        cells = [
            f"{_pct(kinds[k]['median_signed_error'])} ({kinds[k]['cases']})" if k in kinds else ""
            for k in SERVING_METRIC_KINDS
        ]
        lines.append(f"| {group} | {SERVING_GROUPS[group]} | " + " | ".join(cells) + " |")
    columns = list(SERVING_METRICS)
    lines += [
        "",
        "Signed error per run:",
        "",
        "| run | " + " | ".join(columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for run, errors in serving["runs"].items():
        lines.append(f"| {run} | " + " | ".join(_pct(errors[m]) if m in errors else "" for m in columns) + " |")
    lines += ["", "Largest serving errors:", ""]
    worst = sorted((r for r in results if r.case.family == SERVING), key=lambda r: -abs(r.error))[:8]
    for r in worst:
        lines.append(
            f"- **{r.case.case_id}** {r.case.description}: measured {r.case.reference:.4g} {r.case.unit}, "
            f"simulated {r.predicted:.4g} ({100 * r.error:+.1f}%)"
        )
    lines += ["", "### Where the simulator misses, and the mechanism it lacks", ""]
    lines += _serving_analysis(results, serving)
    return lines


def _abs_signed(st: dict | None) -> str:
    """'|e| / signed (n)' for a stats entry, or blank."""
    if not st:
        return ""
    n = st.get("cases", st.get("runs"))
    return f"{100 * st['median_abs_error']:.0f}% / {_pct(st['median_signed_error'])} ({n})"


REGIME_SIGNED_LIMIT = 0.20  # issue 22's target: no regime with a median signed error beyond +-20 %


def _generalisation_section(serving: dict) -> list[str]:
    """The headline over sources beside the pooled figures, each with every source left out in turn; then each
    source and each deployment regime with its runs, statistics and median |error| / signed error per kind."""
    head = serving.get("headline", {})
    lines = [
        "",
        "### Headline: median over sources",
        "",
        "Each source's median |error| (over its runs' statistics of that metric), then the median over sources: a "
        "source counts once however many rows it published, so a large corpus from one publisher cannot carry the "
        "figure. Pooled: the median over every run's statistic (today's reading). Left out: the figure with each "
        "source removed in turn (the range over sources; no figure here rests on one source if the range is "
        "narrow). Output throughput reads request throughput for runs that publish only that (fixed output "
        "lengths: the same relative error).",
        "",
        f"{SOURCE_RULE}",
        "",
        "| metric | sources | runs | median over sources | one source left out (min … max) | pooled | pooled "
        "median signed |",
        "|---|---|---|---|---|---|---|",
    ]
    for h in head.values():
        lines.append(
            f"| {h['label']} | {h['sources']} | {h['runs']} | {100 * h['over_sources']:.1f}% | "
            f"{100 * h['loo_min']:.1f}% … {100 * h['loo_max']:.1f}% | {100 * h['pooled']:.1f}% | "
            f"{_pct(h['median_signed_error'])} |"
        )
    sources = sorted({name for h in head.values() for name in h["leave_one_source_out"]})
    if sources:
        labels = [h["label"] for h in head.values()]
        lines += [
            "",
            "Leave one source out (median over the other sources / pooled over the other sources' runs):",
            "",
            "| source left out | " + " | ".join(labels) + " |",
            "|---|" + "---|" * len(labels),
        ]
        for name in sources:
            cells = []
            for h in head.values():
                loo = h["leave_one_source_out"].get(name)
                cells.append(
                    f"{100 * loo['over_sources']:.1f}% / {100 * loo['pooled']:.1f}%" if loo else "(not in this metric)"
                )
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    kinds = list(SERVING_METRIC_KINDS)
    lines += [
        "",
        "### Per source",
        "",
        "Median |error| / median signed error (statistics in brackets) per metric kind, and per headline metric "
        "(runs in brackets).",
        "",
        "| source | runs | statistics | engines | "
        + " | ".join(kinds)
        + " | "
        + " | ".join(h["label"] for h in head.values())
        + " |",
        "|---|---|---|---|" + "---|" * (len(kinds) + len(head)),
    ]
    for name, st in sorted(serving.get("sources", {}).items(), key=lambda item: -item[1]["statistics"]):
        cells = [_abs_signed(st["kinds"].get(k)) for k in kinds] + [_abs_signed(st["headline"].get(m)) for m in head]
        engines = ", ".join(e.strip() for e in st["engines"])
        lines.append(f"| {name} | {st['runs']} | {st['statistics']} | {engines} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "### Per deployment regime",
        "",
        f"{REGIME_RULE} Median |error| / median signed error (statistics in brackets); a regime whose median signed "
        f"error is beyond ±{100 * REGIME_SIGNED_LIMIT:.0f}% on a metric kind is systematically fast (negative latency, "
        "positive throughput) or slow, a defect even where |error| looks fine, and is flagged.",
        "",
        "| regime | sources | runs | statistics | " + " | ".join(kinds) + " | flagged |",
        "|---|---|---|---|" + "---|" * len(kinds) + "---|",
    ]
    for name, st in serving.get("regimes", {}).items():
        cells = [_abs_signed(st["kinds"].get(k)) for k in kinds]
        flagged = [
            k for k in kinds if k in st["kinds"] and abs(st["kinds"][k]["median_signed_error"]) > REGIME_SIGNED_LIMIT
        ]
        lines.append(
            f"| {name} | {len(st['sources'])} | {st['runs']} | {st['statistics']} | "
            + " | ".join(cells)
            + f" | {', '.join(flagged) or '—'} |"
        )
    return lines


def _serving_analysis(results: list[Result], serving: dict) -> list[str]:
    """What the regime medians say, with the missing engine mechanism each pattern points to. The prose names
    mechanisms (judgement, from each run's setup); every number in it is computed from the results."""
    g = serving["groups"]

    def med(group: str, kind: str) -> str:
        st = g.get(group, {}).get(kind)
        return _pct(st["median_signed_error"]) if st else "n/a"

    def gaps(kind_words: tuple[str, ...], dense_only: bool) -> str:
        """Range of measured - simulated (ms) over the light-load rows of a metric kind."""
        values = [
            r.case.reference - r.predicted
            for r in results
            if r.case.family == SERVING
            and r.case.group == "light load"
            and any(w in r.case.metric for w in kind_words)
            and not r.case.metric.startswith("p99")
            and not (dense_only and r.case.run.scenario.architecture().is_moe)
        ]
        return f"{min(values):.1f}-{max(values):.1f} ms" if values else "n/a"

    moe_runs = [r.case.run for r in results if r.case.family == SERVING and r.case.group == "MoE, loaded"]
    moe = list(dict.fromkeys(run.scenario.model for run in moe_runs))
    mxfp4 = (
        ", MXFP4 weights dequantised on Hopper" if any(run.scenario.weight_dtype == "mxfp4" for run in moe_runs) else ""
    )
    small_batch_moe = [
        r.case.reference / r.predicted
        for r in results
        if r.case.family == SERVING
        and r.case.group == "light load"
        and r.case.metric == "mean_tpot_ms"
        and r.case.run.scenario.architecture().is_moe
    ]
    slow = f"{statistics.median(small_batch_moe):.1f}x" if small_batch_moe else "n/a"
    return [
        f"- **Dense models under load** (TTFT {med('dense, loaded', 'TTFT')}, TPOT {med('dense, loaded', 'TPOT / ITL')}, "
        f"throughput {med('dense, loaded', 'throughput')} median signed): where the KV pool or the batch is full, "
        "the queue, the step roofline and the memory plan carry throughput and the queueing part of TTFT. TPOT is "
        "over-estimated: in a saturated replica it is set by how many prompt chunks share steps with decodes, and "
        "that split differs from vLLM's; these rows do not settle which rule causes it (candidates: the KV pool "
        "size, which sets how many sequences decode together, and the order in which vLLM V1 admits waiting "
        "prompts). Two runs stand apart: Qwen3-0.6B with 500 requests at once (the server admits requests no "
        "faster than its front end tokenises them, about 95 req/s measured, so the engine never holds the 500 "
        "prompts the simulator pushes into its first steps: simulated TTFT far too low, TPOT too high) and 32K-token "
        "prompts on H100 (measured H100 prefill only about 1.5x the A100's where the peak ratio is 3.2x: one "
        "default prefill efficiency for both GPUs).",
        f"- **Short-request floods** (1000 requests of 128 tokens in, 4 out, sent at once; throughput "
        f"{med('short-request flood', 'throughput')}, TTFT {med('short-request flood', 'TTFT')}): the measured "
        "runs are limited by work the simulator does not have: per-request CPU cost in the API server and engine "
        "(chat-template rendering, tokenisation, detokenisation, one SSE stream per request, scheduler bookkeeping "
        "that grows with the number of waiting requests). The GPU finishes the same work several times faster; the "
        "A100 run, whose GPU is slowest, is the one the simulator gets closest. The engine's fixed costs "
        "(`request_overhead_seconds`, `step_host_seconds`, `sequence_host_seconds`) are latencies per request and "
        "per step, not a cap on how many requests a single API process admits per second; that cap (no published "
        "per-version figure we could cite) is still missing. It shows in TPOT too: the simulator admits the flood "
        "into full 8-16k-token prompt steps, so each request's few decode tokens ride steps that also carry "
        "prefills (Qwen3-235B FP8 on 4xH100, budget 16,384: about 480 ms a step, TPOT far too high), while the "
        "measured run's first tokens arrive together at the end (its TTFT median 5.5 s and p99 5.8 s) and its "
        "decodes run in steps of their own. The nearest published bound, vLLM PR #43469 (a mock engine, GB200, "
        "DP 4: 807 req/s through the Python front end), caps per-request front-end time below about 5 ms, too "
        "loose to place the cap.",
        f"- **Light load** (TTFT {med('light load', 'TTFT')}, TPOT/ITL {med('light load', 'TPOT / ITL')}): the "
        f"measured TTFT holds {gaps(('ttft',), dense_only=False)} per request that no GPU term explains (HTTP and "
        "tokenisation, the wait for the next engine step, first-token detokenisation and streaming), and dense "
        f"models decode {gaps(('tpot', 'itl'), dense_only=True)} per token slower than their weight and KV reads "
        "allow, after the engine's fixed costs: per step `step_host_seconds` (scheduling, input preparation) + "
        "`sequence_host_seconds` per sequence + the sampler (`sampler_seconds_per_logit` x sequences x vocabulary), "
        "per request `request_overhead_seconds` (chat template, tokenisation), each a published vLLM measurement, "
        "not fitted to these rows. What remains is version- and host-specific CPU time (HTTP and SSE streaming, "
        "detokenisation, the wait for the next engine step) that those measurements do not cover.",
        f"- **MoE models under load** ({', '.join(moe) or 'none mapped'}; throughput "
        f"{med('MoE, loaded', 'throughput')}, TPOT {med('MoE, loaded', 'TPOT / ITL')}): routed experts are priced "
        "with vLLM's published fused-MoE rates, not the dense roofline: a fixed `moe_layer_seconds` per MoE layer "
        "(routing, alignment, activation, weighted sum), expert weights streamed at `moe_expert_bandwidth` and "
        "expert FLOPs at `moe_expert_compute` (benchmark_moe.py timings on H100, vLLM PR #24700; arithmetic in "
        "`planner/physics/moe_efficiency.py`); dense GEMMs over block-scaled FP8 weights (DeepSeek-R1's checkpoint, "
        "Qwen's -FP8 releases) run at 0.68 of the BF16 rate on Hopper (vLLM PR #23280) and attention in the BF16 "
        "cache's format. What they leave: the DeepSeek-R1 rows stay too fast (MLA decode attention and the "
        "fused-MoE calls over block-scaled experts have no published rate: the expert figures were measured with "
        f"per-tensor scales){mxfp4 and ', as are MXFP4 weights dequantised on Hopper'}. "
        f"A batch of four sequences on 8 GPUs (the DeepSeek-R1 ShareGPT row, light load) decodes {slow} slower than "
        "simulated: routing, expert and synchronisation kernels across 8 GPUs at tiny batch cost more per layer "
        "than one GPU's fused-MoE call, launches and link latency. Needed: MLA decode attention's rate and a "
        "fused-MoE figure for block-scaled FP8 and MXFP4 experts.",
        "- **Tails:** p99 TTFT under a flood follows the queue (the last request waits for all the others), so it "
        "tracks the throughput error; with few requests in flight the simulator has no source of variance (fixed "
        "lengths, no CPU jitter, no sampler or prefix-cache variation), so its p99 equals its mean and measured p99 "
        "TTFT and TPOT sit above it.",
        "- Not exercised by these rows: prefix caching (random prompts share no prefix), speculative decoding, "
        "disaggregated prefill, and preemption at long outputs.",
    ]


def sensitivity_study(cases: list[Case]) -> list[tuple[str, dict]]:
    cases = [c for c in cases if c.family in FAMILIES]  # the serving family is not part of the bands' study
    rows = [("defaults", summarize(evaluate(cases)))]
    for name in (
        "prefill_compute",
        "decode_compute",
        "memory_bandwidth",
        "communication",
        "training_compute",
        "layer_overhead_seconds",
        "step_host_seconds",
        "request_overhead_seconds",
    ):
        for factor in (0.8, 1.2):
            value = getattr(DEFAULT_EFFICIENCY, name) * factor
            if not name.endswith("_seconds"):
                value = min(value, 1.0)
            efficiency = DEFAULT_EFFICIENCY.model_copy(update={name: value, "source": "sensitivity"})
            rows.append((f"{name} x{factor}", summarize(evaluate(cases, efficiency))))
    return rows


@contextmanager
def _replaced(module, **attributes):
    """Module attributes swapped for one evaluation (a what-if, never the engine's state after it)."""
    saved = {name: getattr(module, name) for name in attributes}
    for name, value in attributes.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def _without_gemm_shape():
    return _replaced(
        gemm_efficiency,
        ceiling_ratio=lambda *args, **kwargs: 1.0,
        training_ceiling_ratio=lambda *args, **kwargs: 1.0,
        gemm_tail_seconds=lambda *args, **kwargs: 0.0,
    )


def _without_custom_allreduce():
    return _replaced(collectives, has_peer_link=lambda *args, **kwargs: False)


def _block_scales_at_fp8_rate():
    """Block-scaled FP8 GEMMs at the FP8 MAMF, as per-tensor ones (no published share of the BF16 rate)."""
    return _replaced(gemm_efficiency, block_scaled_fp8_ceiling=lambda *args, **kwargs: None)


def _expert_compute_at_the_mean():
    """Routed-expert FLOPs of every format at the 0.22 mean of the two PR #24700 shapes, as before the figure of
    the experts' own format (BF16 0.315, FP8 0.120) was read."""
    return _replaced(moe_efficiency, expert_compute_format_ratio=lambda *args, **kwargs: 1.0)


def _no_overlap_scheduler():
    """Every runtime pays vLLM's per-step CPU time: the overlap schedulers' runtimes swapped for copies without."""
    return _runtimes_with(host_work_overlapped=False)


@contextmanager
def _runtimes_with(**fields):
    """Every runtime profile with `fields` replaced, for one evaluation."""
    saved = dict(runtimes.RUNTIMES)
    for name, profile in saved.items():
        runtimes.RUNTIMES[name] = replace(profile, **fields)
    try:
        yield
    finally:
        runtimes.RUNTIMES.update(saved)


def _no_block_fp8_floor():
    """Block-scaled FP8 dense GEMMs without their runtime's small-M kernel floor (plain kernel tails only)."""
    return _runtimes_with(block_fp8_linear_kernel=None)


def _no_mla_decode_copies():
    """vLLM V0 without the MLA decode copies it materialised: a DeepSeek model's weights as the checkpoint's."""
    return _runtimes_with(mla_absorbed_weights=False)


def _one_roofline_per_step():
    """The step's kernel groups overlapping, as before they were added: max(all FLOPs' time, all bytes' time)."""
    return _replaced(
        roofline,
        context_free_groups=lambda gemm_c, gemm_m, expert_c, expert_m: (gemm_c + expert_c, gemm_m + expert_m, 0.0),
    )


# Mechanisms of issue 13 that can be switched off one at a time: (name, efficiency with it off, or a context that
# switches it off). Each row of the study re-plans every case with that one mechanism off.
MECHANISMS: tuple[tuple[str, Efficiency | None, Callable | None], ...] = (
    ("GEMM efficiency by GPU generation and shape", None, _without_gemm_shape),
    (
        "fused-MoE kernel rates (experts priced as dense decode)",
        DEFAULT_EFFICIENCY.model_copy(
            update={
                "moe_expert_bandwidth": DEFAULT_EFFICIENCY.memory_bandwidth,
                "moe_expert_compute": DEFAULT_EFFICIENCY.decode_compute,
                "moe_layer_seconds": 2 * gemm_efficiency.GEMM_TAIL_SECONDS,
                "source": "mechanism study",
            }
        ),
        _expert_compute_at_the_mean,
    ),
    (
        "routed-expert FLOPs at their format's rate (every format at the 0.22 mean instead)",
        None,
        _expert_compute_at_the_mean,
    ),
    (
        "per-step and per-request engine costs",
        DEFAULT_EFFICIENCY.model_copy(
            update={
                "step_host_seconds": 0.0,
                "sequence_host_seconds": 0.0,
                "sampler_seconds_per_logit": 0.0,
                "request_overhead_seconds": 0.0,
                "source": "mechanism study",
            }
        ),
        None,
    ),
    ("custom one-/two-shot all-reduce (NCCL ring/tree only)", None, _without_custom_allreduce),
    (
        "block-scaled FP8 GEMMs at 0.68 x the BF16 rate on Hopper (as per-tensor FP8: the FP8 MAMF, no small-M floor)",
        None,
        _block_scales_at_fp8_rate,
    ),
    (
        "block-scaled FP8 GEMMs' small-M kernel floor on Hopper (plain kernel tails instead)",
        None,
        _no_block_fp8_floor,
    ),
    ("vLLM V0's MLA decode copies (weights as the checkpoint's)", None, _no_mla_decode_copies),
    ("overlap schedulers (SGLang, TensorRT-LLM pay vLLM's per-step CPU time)", None, _no_overlap_scheduler),
    (
        "kernel groups one after another (one roofline over the whole step, decode GEMMs at the former 0.50)",
        DEFAULT_EFFICIENCY.model_copy(update={"decode_compute": 0.50, "source": "mechanism study"}),
        _one_roofline_per_step,
    ),
)


SERVING_OVER_SOURCES = "serving over sources"  # the mechanism study's column: median over sources, all metrics


def _medians(results: list[Result]) -> dict[str, float]:
    """Median |error| per family, the serving family pooled and over sources (each source's median |error| over
    all its serving statistics), and that figure with each source left out (keys '<figure> without <source>')."""
    medians = {family: s["median_abs_error"] for family, s in summarize(results).items()}
    serving = [r for r in results if r.case.family == SERVING and math.isfinite(r.error)]
    if serving:
        medians[SERVING] = statistics.median(abs(r.error) for r in serving)
        per_source = source_medians(serving)
        medians[SERVING_OVER_SOURCES] = over_sources(per_source)
        for left in per_source:
            rest = {k: v for k, v in per_source.items() if k != left}
            medians[f"{SERVING_OVER_SOURCES} without {left}"] = over_sources(rest)
    return medians


def mechanism_study(cases: list[Case]) -> list[tuple[str, dict[str, float]]]:
    """Median |error| per family with every mechanism on, then with each one off: what each one buys."""
    rows = [("all mechanisms on (the report)", _medians(evaluate(cases)))]
    for name, efficiency, switch in MECHANISMS:
        if switch is None:
            results = evaluate(cases, efficiency or DEFAULT_EFFICIENCY)
        else:
            _SIMULATED.clear()  # simulations are kept per efficiency; a switched module is not in that key
            with switch():
                results = evaluate(cases, efficiency or DEFAULT_EFFICIENCY)
            _SIMULATED.clear()
        rows.append((f"without {name}", _medians(results)))
    return rows


def _finite_or_none(value):
    """NaN (a figure with too few sources left, e.g. one source left out of two) as JSON null."""
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite_or_none(v) for v in value]
    return None if isinstance(value, float) and not math.isfinite(value) else value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "accuracy")
    parser.add_argument("--sensitivity", action="store_true")
    parser.add_argument("--no-summary-file", action="store_true", help="do not rewrite planner/accuracy.json")
    args = parser.parse_args(argv)
    missing = [name for name in REFERENCE_FILES if not (args.reference / name).is_file()]
    if missing:
        print(
            f"error: {args.reference} lacks {', '.join(missing)}: the published figures live in the project's "
            "shared folder (../shared/reference beside this repository); pass --reference DIR",
            file=sys.stderr,
        )
        return 2
    cases, unmapped = collect(args.reference)
    results = evaluate(cases)
    summary = summarize(results)
    serving = summarize_serving(results)
    if serving:  # the decisions the serving sweeps measured, made from the same replays (accuracy_decisions.py)
        runs = [r for r in results if r.case.family == SERVING and math.isfinite(r.error)]
        serving["decisions"] = accuracy_decisions.summary(
            runs, traffic_ranges, _read(SERVING_FILE), unmapped, serving_source
        )
    sensitivity = sensitivity_study(cases) if args.sensitivity else None
    mechanisms = mechanism_study(cases) if args.sensitivity else None
    write_report(results, unmapped, summary, args.out, sensitivity, serving, mechanisms)
    if not args.no_summary_file:
        serving_summary = _finite_or_none({k: v for k, v in serving.items() if k not in ("groups", "runs")})
        SUMMARY_FILE.write_text(
            json.dumps(
                {
                    "schema_version": 2,
                    "generated_by": "benchmarks/accuracy.py",
                    "families": summary,
                    # Not read by planner/uncertainty.py (it reads "families"): no plan number carries its band.
                    SERVING: serving_summary,
                },
                indent=2,
            )
            + "\n"
        )
    for family, s in summary.items():
        print(
            f"{family:15s} n={s['cases']:2d}  median |err| {100 * s['median_abs_error']:5.1f}%  "
            f"p90 {100 * s['p90_abs_error']:5.1f}%  bias {100 * s['median_signed_error']:+5.1f}%  "
            f"{coverage_text(s)}"
        )
    if serving:
        print(f"{SERVING:15s} n={serving['cases']:3d} {coverage_text(serving)}")
    for metric, s in serving.get("metrics", {}).items():
        print(
            f"{SERVING + ' ' + metric:33s} n={s['cases']:2d}  median |err| {100 * s['median_abs_error']:5.1f}%  "
            f"bias {100 * s['median_signed_error']:+6.1f}%"
        )
    for metric, h in serving.get("headline", {}).items():
        print(
            f"{SERVING + ' over sources ' + metric:33s} sources={h['sources']}  median over sources "
            f"{100 * h['over_sources']:5.1f}%  one left out {100 * h['loo_min']:.1f}-{100 * h['loo_max']:.1f}%  "
            f"pooled {100 * h['pooled']:5.1f}%"
        )
    for regime, st in serving.get("regimes", {}).items():
        signed = ", ".join(f"{k} {_pct(v['median_signed_error'])}" for k, v in st["kinds"].items())
        print(f"{SERVING + ' regime':15s} {regime:40s} {signed}")
    print(f"{len(unmapped)} rows not mapped (reasons in {args.out / 'report.md'})")
    ceilings = (read_ceilings(), read_source_ceilings()) if CEILINGS_FILE.is_file() else None
    for breach in ceiling_breaches(summary, serving, *ceilings) if ceilings else []:
        print(f"CEILING: {breach}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
