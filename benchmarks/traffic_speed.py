"""How fast is the traffic simulation? Requests simulated per second, a load curve and an SLO search.

    .venv/bin/python benchmarks/traffic_speed.py [--requests 10000]

A report, not a timed assertion: numbers depend on the machine and its load (quote them with it). Each
case is the best of three runs on one core (the simulation is single-threaded Python + numpy). The target
(issue 11): 10,000 requests on one configuration in at most a second, the light-load case the slowest
(one loop iteration per arrival and per completion, the decode runs between them short). A speculative
stream takes one loop iteration per draft-and-verify round (its own, slower path).
"""

from __future__ import annotations

import argparse
import platform
import time

from planner.inference.scenario import InferenceScenario
from planner.inference.traffic import TrafficEngine
from planner.inference.workload import Slo, Traffic


def best_seconds(fn, runs: int = 3) -> tuple[float, object]:
    best, result = float("inf"), None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    args = parser.parse_args(argv)
    n = args.requests
    print(f"machine: {platform.processor() or platform.machine()}, Python {platform.python_version()}")
    cases = [
        ("Llama 3.1 70B, 4x H100 TP4, 2048/512, light load (30%)", InferenceScenario(), 0.3),
        ("Llama 3.1 70B, 4x H100 TP4, 2048/512, near saturation (90%)", InferenceScenario(), 0.9),
        ("Llama 3.1 70B, 4x H100 TP4, 2048/512, all at t=0", InferenceScenario(), None),
        (
            "Llama 3.1 8B, 1x H100, uniform 1024±50%/256±50%, 70%",
            InferenceScenario(
                model="llama-3.1-8b",
                num_gpus=1,
                tensor_parallel=1,
                concurrency=256,
                prompt_tokens=1024,
                output_tokens=256,
            ),
            0.7,
        ),
        (
            "Mixtral 8x7B, 8x H100 (2 replicas TP4), 70%",
            InferenceScenario(model="mixtral-8x7b", num_gpus=8, tensor_parallel=4, concurrency=256),
            0.7,
        ),
        # speculative decoding runs one loop turn per draft-and-verify round (tokens per step vary by sequence)
        (
            "Llama 3.1 70B TP4, EAGLE k=3 a=0.8, 2048/512, 70%",
            InferenceScenario(speculative={"method": "eagle", "num_speculative_tokens": 3, "acceptance_rate": 0.8}),
            0.7,
        ),
    ]
    print(f"\n{'case':<62}{'requests':>9}{'steps':>10}{'seconds':>9}{'requests/s':>12}")
    for name, scenario, load in cases:
        engine = TrafficEngine.of(scenario, traffic=Traffic(num_requests=n))
        rate = None if load is None else load * engine.static_requests_per_second_per_replica * engine.replicas
        lengths = {"lengths": "uniform", "range_ratio": 0.5} if "uniform" in name else {}
        traffic = Traffic(requests_per_second=rate, num_requests=n, seed=1, **lengths)
        seconds, result = best_seconds(lambda e=engine, t=traffic: e.simulate(t))
        print(f"{name:<62}{n:>9,}{result.simulated_steps:>10,}{seconds:>9.2f}{n / seconds:>12,.0f}")

    engine = TrafficEngine.of(InferenceScenario(), traffic=Traffic(num_requests=2000, slo=Slo(ttft_seconds=2.0)))
    seconds, curve = best_seconds(engine.load_curve, runs=1)
    print(f"\nload curve ({len(curve.points)} rates x 600 requests, default scenario): {seconds:.2f} s")
    seconds, answer = best_seconds(lambda: engine.capacity(40.0), runs=1)
    print(
        f"SLO search (p99 TTFT <= 2 s, bisection of 2,000-request runs): {seconds:.2f} s -> "
        f"{answer.max_requests_per_second_per_replica:.2f} requests/s per replica, {answer.gpus_needed} GPUs for 40/s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
