"""A plan's marginal cost in the CLI against llm-analysis 0.2.2's per-scenario cost, measured in the same run.

    .venv/bin/python benchmarks/cli_plan_speed.py [--count 2000] [--repeats 3]

Builds COUNT varied inference scenarios (dense models llm-analysis also ships a config for, four GPU types,
TP 1-8, one or two replicas, BF16 / INT8 / INT4 weights, BF16 / FP8 KV cache, prompts of 128-4,096 tokens,
outputs of 16-1,024, 1-64 sequences per replica), written as one JSON list, and times

- Headroom: `python -m planner plan LIST.json` (JSON on stdout) on the whole list and on a one-scenario list;
  the difference over COUNT - 1 is the marginal cost of one plan (interpreter start and imports cancel out);
- llm-analysis 0.2.2 (https://pypi.org/project/llm-analysis/0.2.2/): a subprocess that reads the comparable
  list (the same model, GPU, TP, batch per replica, prompt and output lengths, weight and KV bytes) and runs
  `llm_analysis.analysis.infer` on each, writing its summaries as one JSON list; the same difference. Its
  own CLI (python-fire) takes one scenario per process, so a loop over its Python API is its best case.

Times are CPU seconds of the child process (getrusage), the best of --repeats runs: on a shared machine the
minimum of CPU time is far less disturbed than a wall-clock mean. Each tool is also run under a small driver that
reports the CPU seconds of its own work (read the list, analyse every scenario, write the JSON; Headroom's driver
calls planner.cli.main.main, what `python -m planner` runs): the same marginal cost without subtracting two noisy
process start-ups (llm-analysis's takes ~3 s, loading its config files). A report, not a timed assertion.

llm-analysis is optional: install it with `pip install --no-deps llm-analysis==0.2.2 "fire==0.5.0" termcolor
six` (its declared dependencies pin huggingface-hub < 0.15 and transformers < 5, which it only uses to fetch
configs from the Hub; the configs it ships are enough here). Without it the script says so and prints
Headroom's figure alone.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Headroom catalog id -> llm-analysis 0.2.2's shipped model config (the same architecture, or its closest twin).
MODELS = {
    "llama-2-7b": "NousResearch_Llama-2-7b-hf",
    "llama-2-13b": "decapoda-research_llama-13b-hf",
    "llama-2-70b": "upstage_Llama-2-70b-instruct-v2",
    "gpt-j-6b": "EleutherAI_gpt-j-6b",
    "opt-13b": "facebook_opt-13b",
    "opt-66b": "facebook_opt-66b",
}
GPUS = {"h100-sxm": "h100-sxm-80gb", "h100-pcie": "h100-pcie-80gb", "a100-80gb": "a100-sxm-80gb"}
WEIGHTS = {"bf16": "w16a16e16", "int8": "w8a16e16", "int4": "w4a16e16"}
KV_BYTES = {"bf16": 2, "fp8": 1}
# Smallest tensor-parallel degree whose BF16 weights leave room for a KV cache on an 80 GB GPU.
MIN_TP = {"llama-2-70b": 4, "opt-66b": 4}

# Each driver reports the CPU seconds of its own work (reading the list, every analysis, writing the JSON) on
# stderr: the same marginal cost without the noise of a whole process's start-up, which is subtracted otherwise.
LLM_ANALYSIS_DRIVER = """
import json, sys, time
from llm_analysis.analysis import infer
start = time.process_time()
out = []
for s in json.load(open(sys.argv[1])):
    try:
        out.append(infer(log_level="ERROR", **s))
    except AssertionError as exc:  # e.g. the batch does not fit: llm-analysis refuses it
        out.append({"error": str(exc)})
json.dump(out, sys.stdout, indent=2, default=str)
sys.stdout.write("\\n")
sys.stdout.flush()
sys.stderr.write(f"work_cpu_seconds={time.process_time() - start}\\n")
"""
# `python -m planner plan LIST.json` (planner/__main__.py calls the same main), with the same report on stderr.
HEADROOM_DRIVER = """
import sys, time
from planner.cli.main import main
start = time.process_time()
status = main(["plan", sys.argv[1]])
sys.stdout.flush()
sys.stderr.write(f"work_cpu_seconds={time.process_time() - start}\\n")
sys.exit(status)
"""


def scenarios(count: int, seed: int = 0) -> tuple[list[dict], list[dict]]:
    """`count` Headroom scenarios and the comparable llm-analysis `infer` arguments, one for one."""
    rng = random.Random(seed)
    headroom, llm_analysis = [], []
    for _ in range(count):
        model = rng.choice(list(MODELS))
        gpu = rng.choice(list(GPUS))
        weights, kv = rng.choice(list(WEIGHTS)), rng.choice(list(KV_BYTES))
        tp = rng.choice([t for t in (1, 2, 4, 8) if t >= MIN_TP.get(model, 1)])
        replicas = rng.choice((1, 2))
        per_replica = rng.choice((1, 2, 4, 8, 16, 32, 64))
        prompt, output = rng.choice((128, 512, 1024, 2048, 4096)), rng.choice((16, 64, 256, 1024))
        if model.startswith("opt") or model == "gpt-j-6b":
            prompt = min(prompt, 2048 - output)  # their 2,048-token context
        headroom.append(
            {
                "kind": "inference",
                "model": model,
                "gpu": gpu,
                "num_gpus": tp * replicas,
                "tensor_parallel": tp,
                "weight_dtype": weights,
                "kv_cache_dtype": kv,
                "prompt_tokens": prompt,
                "output_tokens": output,
                "concurrency": per_replica * replicas,
            }
        )
        llm_analysis.append(
            {
                "model_name": MODELS[model],
                "gpu_name": GPUS[gpu],
                "dtype_name": WEIGHTS[weights],
                "tp_size": tp,
                "batch_size_per_gpu": per_replica,
                "seq_len": prompt,
                "num_tokens_to_generate": output,
                "kv_cache_dtype_bytes": KV_BYTES[kv],
                "flops_efficiency": 0.6,
                "hbm_memory_efficiency": 0.8,
            }
        )
    return headroom, llm_analysis


def child_cpu_seconds(command: list[str], sink: Path) -> tuple[float, float, float]:
    """CPU seconds (user + system) and wall seconds of one child process, stdout sent to `sink`, and the CPU
    seconds of its work as a driver reports them on stderr (NaN when it does not)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    with sink.open("w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.PIPE, text=True, check=True, cwd=ROOT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    work = [line for line in done.stderr.splitlines() if line.startswith("work_cpu_seconds=")]
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return cpu, wall, float(work[-1].split("=")[1]) if work else float("nan")


def marginal(command_for, items: list[dict], folder: Path, name: str, repeats: int) -> dict:
    """Best-of-`repeats` CPU (and wall) seconds on the whole list and on its first item, and the difference
    per extra item."""
    full, one = folder / f"{name}.json", folder / f"{name}-one.json"
    full.write_text(json.dumps(items))
    one.write_text(json.dumps(items[:1]))
    sink = folder / f"{name}.out"
    runs = {"full": [], "one": []}
    for _ in range(repeats):  # interleaved, so a burst of load on the machine hits both alike
        runs["one"].append(child_cpu_seconds(command_for(one), sink))
        runs["full"].append(child_cpu_seconds(command_for(full), sink))
    cpu_full, cpu_one = min(r[0] for r in runs["full"]), min(r[0] for r in runs["one"])
    wall_full, wall_one = min(r[1] for r in runs["full"]), min(r[1] for r in runs["one"])
    work_full, work_one = min(r[2] for r in runs["full"]), min(r[2] for r in runs["one"])
    return {
        "per_item_work": (work_full - work_one) / (len(items) - 1),
        "cpu_full": cpu_full,
        "cpu_one": cpu_one,
        "wall_full": wall_full,
        "wall_one": wall_one,
        "per_item_cpu": (cpu_full - cpu_one) / (len(items) - 1),
        "per_item_wall": (wall_full - wall_one) / (len(items) - 1),
        "output_bytes": (folder / f"{name}.out").stat().st_size,
    }


def report(label: str, result: dict, count: int) -> None:
    print(
        f"  {label:13s} {result['per_item_cpu'] * 1e3:6.3f} ms CPU per scenario: process on {count:,} minus process "
        f"on 1 ({result['cpu_full']:.2f} - {result['cpu_one']:.2f} s CPU; wall {result['per_item_wall'] * 1e3:.3f} "
        f"ms per scenario)\n  {'':13s} {result['per_item_work'] * 1e3:6.3f} ms CPU per scenario by its driver's own "
        "clock (start-up left out)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.count < 2:
        parser.error("--count must be at least 2")
    headroom, llm_analysis = scenarios(args.count)
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()[0]:.1f}, Python {platform.python_version()}; {args.count:,} scenarios, "
        f"best of {args.repeats}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ours = marginal(
            lambda path: [sys.executable, "-m", "planner", "plan", str(path)],
            headroom,
            folder,
            "headroom",
            args.repeats,
        )
        # The same CLI code (planner.cli.main.main) under the driver that reports its own CPU clock; `-c` with
        # cwd=ROOT imports this checkout's planner, as `-m planner` does.
        ours |= {
            "per_item_work": marginal(
                lambda path: [sys.executable, "-c", HEADROOM_DRIVER, str(path)],
                headroom,
                folder,
                "headroom",
                args.repeats,
            )["per_item_work"]
        }
        report("Headroom", ours, args.count)
        if importlib.util.find_spec("llm_analysis") is None:
            print(
                "  llm-analysis   not installed (pip install --no-deps llm-analysis==0.2.2 'fire==0.5.0' termcolor "
                "six): Headroom's figure alone"
            )
            return
        driver = folder / "llm_analysis_driver.py"
        driver.write_text(LLM_ANALYSIS_DRIVER)
        theirs = marginal(
            lambda path: [sys.executable, str(driver), str(path)], llm_analysis, folder, "llm-analysis", args.repeats
        )
        refused = sum("error" in r for r in json.loads((folder / "llm-analysis.out").read_text()))
        report("llm-analysis", theirs, args.count)
        if refused:
            print(f"  (llm-analysis refused {refused:,} of the scenarios with an assertion; they count as done)")
        print(
            f"  Headroom / llm-analysis per scenario: {ours['per_item_cpu'] / theirs['per_item_cpu']:.2f}x (processes), "
            f"{ours['per_item_work'] / theirs['per_item_work']:.2f}x (drivers' clocks)"
        )


if __name__ == "__main__":
    main()
