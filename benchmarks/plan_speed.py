"""How fast is the engine? Median time of one plan() and of a vectorized sweep.

    .venv/bin/python benchmarks/plan_speed.py

A report, not a timed assertion: numbers depend on the machine (quote them with it).
"""

from __future__ import annotations

import platform
import statistics
import time

from planner import plan
from planner.inference.scenario import InferenceScenario
from planner.scenario import parse_scenario
from planner.search.sweep import evaluate_inference, inference_grid


def median_seconds(fn, repeats: int = 7, number: int = 200) -> float:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number)
    return statistics.median(samples)


def main() -> None:
    print(f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}")
    inference = InferenceScenario()
    print(f"plan(inference default)         median {median_seconds(lambda: plan(inference)) * 1e3:.3f} ms")
    moe = InferenceScenario(model="deepseek-v3", gpu="h200", num_gpus=8, tensor_parallel=8, weight_dtype="fp8")
    print(f"plan(deepseek-v3, 8xH200)       median {median_seconds(lambda: plan(moe)) * 1e3:.3f} ms")
    try:
        training = parse_scenario({"kind": "training"})
        print(f"plan(training default)          median {median_seconds(lambda: plan(training)) * 1e3:.3f} ms")
    except ImportError:
        pass
    print(
        f"validate + plan (dict input)    median "
        f"{median_seconds(lambda: plan({'model': 'llama-3.1-8b', 'num_gpus': 1, 'tensor_parallel': 1})) * 1e3:.3f} ms"
    )

    grid = inference_grid(
        inference,
        gpus=["h100-sxm", "h200", "b200", "a100-80gb", "l40s", "mi300x"],
        num_gpus=[1, 2, 4, 8, 16, 32],
        tensor_parallel=[1, 2, 4, 8],
        pipeline_parallel=[1, 2, 4],
        weight_dtypes=["bf16", "fp8", "int8", "int4"],
        kv_cache_dtypes=["bf16", "fp8", "int8"],
        concurrency=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768],
    )
    build = median_seconds(lambda: inference_grid(inference, concurrency=[1] * 1), repeats=3, number=5)
    start = time.perf_counter()
    result = evaluate_inference(inference, grid)
    first = time.perf_counter() - start
    sweep = median_seconds(lambda: evaluate_inference(inference, grid), repeats=3, number=1)
    print(
        f"sweep of {len(grid):,} configurations: median {sweep:.3f} s (first run {first:.3f} s, "
        f"{sweep / len(grid) * 1e6:.2f} µs per configuration; {int(result.valid.sum()):,} valid, "
        f"{int(result.fits.sum()):,} fit)"
    )
    del build


if __name__ == "__main__":
    main()
