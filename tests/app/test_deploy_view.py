"""The deploy commands on the Inference and Review pages: the serve and benchmark commands of the current plan,
holding its tensor parallelism and lengths; the engine picker switches the spelling."""

from __future__ import annotations

from conftest import assert_clean, open_page

from planner import InferenceScenario
from planner.share import scenario_to_query_params

SCENARIO = InferenceScenario(num_gpus=4, tensor_parallel=2, prompt_tokens=1000, output_tokens=200, concurrency=24)


def _codes(at) -> list[str]:
    return [c.value for c in at.code]


def _serve_and_bench(at, serve: str, bench: str) -> tuple[str, str]:
    serves = [c for c in _codes(at) if c.startswith(serve)]
    benches = [c for c in _codes(at) if c.startswith(bench)]
    assert len(serves) == 1 and len(benches) == 1, _codes(at)
    return serves[0], benches[0]


def _check_plan_numbers(serve: str, bench: str) -> None:
    assert "--tensor-parallel-size 2" in serve and "--max-num-seqs 12" in serve  # 24 sequences over 2 replicas
    assert "--max-model-len 1200" in serve
    assert "--random-input-len 1000" in bench and "--random-output-len 200" in bench


def test_inference_page_shows_the_plans_commands():
    at = open_page("inference", scenario_to_query_params(SCENARIO, "inference_"))
    assert_clean(at)
    serve, bench = _serve_and_bench(at, "vllm serve meta-llama/Llama-3.1-70B", "vllm bench serve")
    _check_plan_numbers(serve, bench)
    at.radio(key="inference_deploy_engine").set_value("sglang").run()
    assert_clean(at)
    serve, bench = _serve_and_bench(at, "python -m sglang.launch_server", "python -m sglang.bench_serving")
    assert "--tp-size 2" in serve and "--max-running-requests 12" in serve and "--random-output-len 200" in bench


def test_review_page_shows_the_plans_commands():
    at = open_page("review", scenario_to_query_params(SCENARIO, "inference_"))
    assert_clean(at)
    serve, bench = _serve_and_bench(at, "vllm serve meta-llama/Llama-3.1-70B", "vllm bench serve")
    _check_plan_numbers(serve, bench)
    assert any("Notes" in m.value for m in at.markdown)
