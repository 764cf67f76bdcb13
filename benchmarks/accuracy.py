"""Headroom's error against published measurements.

    .venv/bin/python benchmarks/accuracy.py [--reference ../shared/reference] [--out benchmarks/accuracy]
                                            [--sensitivity]

Turns every usable measured row of the reference tables into a scenario, plans it with the default
efficiencies (never tuned per case), and writes:
  <out>/report.csv   case, family, reference, predicted, error %, reading, source row
  <out>/report.md    the table, per-family median and p90 |error|, worst cases, unmapped rows with reasons
  planner/accuracy.json   per-family error summary that the planner turns into error bands
`--sensitivity` adds how each family's error moves when an efficiency default moves by +-20 %.
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
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from planner import plan  # noqa: E402
from planner.inference.scenario import InferenceScenario  # noqa: E402
from planner.physics.efficiency import DEFAULT_EFFICIENCY, Efficiency  # noqa: E402
from planner.scenario import parse_scenario  # noqa: E402

DEFAULT_REFERENCE = ROOT.parent / "shared" / "reference"
SUMMARY_FILE = ROOT / "planner" / "accuracy.json"
FAMILIES = ("memory", "decode_speed", "ttft", "max_throughput", "training_step")

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


def _plan(scenario, efficiency: Efficiency):
    return plan(scenario, None if efficiency == DEFAULT_EFFICIENCY else Calibration(efficiency))


def _read(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


# ---------------------------------------------------------------------------------------------
# memory rows (vLLM paper, Table 1 and Fig. 1)


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
            concurrency=1,
            gpu_memory_utilization=0.9,
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
                "GB read as GiB (the paper's 12 GB = 15.7K slots x 800 KB = 12.0 GiB); predicted = budget at "
                "gpu_memory_utilization 0.9 minus weights, activations and runtime, summed over GPUs",
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
        concurrency=1,
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
        )
        if "max throughput" in row["scenario"]:
            # All requests queued at once: the engine runs as many as fit in its KV pool, up to its
            # maximum batch (TensorRT-LLM's default max_batch_size, 2048 for these runs).
            reading = (
                "all requests at once: concurrency = min(requests, 2048, what fits at "
                "gpu_memory_utilization 0.95 - kv_cache_free_gpu_mem_fraction 0.90-0.95)"
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
    extra = {}
    if layout:
        tp, pp, dp = map(int, layout.groups())
        zero = 0
    elif "ZeRO-3" in row["parallelism"]:
        tp, pp, dp, zero = 1, 1, gpus, 3
        extra = {"overlap_grad_reduce": True}
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
        **extra,
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
        }
    return summary


def _quantile(ordered: list[float], q: float) -> float:
    """Nearest-rank quantile (with 2 cases, p10 and p90 are the extremes)."""
    rank = min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))
    return ordered[rank]


def collect(reference: Path) -> tuple[list[Case], list[Unmapped]]:
    memory, m_unmapped = memory_cases(_read(reference / "memory_measured.csv"))
    throughput_rows = _read(reference / "throughput_measured.csv")
    inference, i_unmapped = inference_cases(throughput_rows)
    training, t_unmapped = training_cases(throughput_rows)
    return memory + inference + training, m_unmapped + i_unmapped + t_unmapped


def write_report(
    results: list[Result],
    unmapped: list[Unmapped],
    summary: dict,
    out: Path,
    sensitivity: list[tuple[str, dict]] | None = None,
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
        "Efficiencies are the documented defaults (`planner/performance.py: Efficiency`), identical for every case.",
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
    lines += ["", "## Worst cases", ""]
    for r in sorted(results, key=lambda r: -abs(r.error))[:5]:
        lines.append(
            f"- **{r.case.case_id}** ({r.case.family}) {r.case.description}: reference "
            f"{r.case.reference:.4g} {r.case.unit}, predicted {r.predicted:.4g} ({100 * r.error:+.1f}%)"
        )
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
    (out / "report.md").write_text("\n".join(lines) + "\n")


def sensitivity_study(cases: list[Case]) -> list[tuple[str, dict]]:
    rows = [("defaults", summarize(evaluate(cases)))]
    for name in (
        "prefill_compute",
        "decode_compute",
        "memory_bandwidth",
        "communication",
        "training_compute",
        "layer_overhead_seconds",
    ):
        for factor in (0.8, 1.2):
            value = getattr(DEFAULT_EFFICIENCY, name) * factor
            if name != "layer_overhead_seconds":
                value = min(value, 1.0)
            efficiency = DEFAULT_EFFICIENCY.model_copy(update={name: value, "source": "sensitivity"})
            rows.append((f"{name} x{factor}", summarize(evaluate(cases, efficiency))))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference", type=Path, default=DEFAULT_REFERENCE)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "accuracy")
    parser.add_argument("--sensitivity", action="store_true")
    parser.add_argument("--no-summary-file", action="store_true", help="do not rewrite planner/accuracy.json")
    args = parser.parse_args(argv)
    cases, unmapped = collect(args.reference)
    results = evaluate(cases)
    summary = summarize(results)
    write_report(results, unmapped, summary, args.out, sensitivity_study(cases) if args.sensitivity else None)
    if not args.no_summary_file:
        SUMMARY_FILE.write_text(
            json.dumps(
                {
                    "schema_version": 1,
                    "generated_by": "benchmarks/accuracy.py",
                    "families": summary,
                },
                indent=2,
            )
            + "\n"
        )
    for family, s in summary.items():
        print(
            f"{family:15s} n={s['cases']:2d}  median |err| {100 * s['median_abs_error']:5.1f}%  "
            f"p90 {100 * s['p90_abs_error']:5.1f}%  bias {100 * s['median_signed_error']:+5.1f}%"
        )
    print(f"{len(unmapped)} rows not mapped (reasons in {args.out / 'report.md'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
