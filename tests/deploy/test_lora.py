"""The scenario's LoRA adapters in each engine's commands, flag by flag.

Expected values are the scenario's and the plan's: GPU slots = lora.max_loras (else the planned runtime's default:
vLLM 1, SGLang 8), at most the adapters; host slots = lora.max_cpu_loras (else every adapter); the rank as given,
rounded up for vLLM to one of 1, 8, 16, 32, 64, 128, 256, 320, 512 (vllm/config/lora.py MaxLoRARanks). Flag names:
the sources cited in planner/deploy/lora.py.
"""

from __future__ import annotations

import pytest

from planner.deploy import deploy
from planner.deploy.lora import round_up_rank
from planner.inference.scenario import InferenceScenario
from planner.plan import plan

LLAMA = {"model": "llama-3.1-8b", "gpu": "h100-sxm", "num_gpus": 1, "tensor_parallel": 1}
LORA_FLAGS = (
    "--enable-lora",
    "--max-loras",
    "--max-lora-rank",
    "--max-cpu-loras",
    "--lora-modules",
    "--max-loras-per-batch",
    "--lora-target-modules",
    "--lora-paths",
    "--max-loaded-loras",
    "--lora-name",
)


def _deploy(engine: str | None = None, **fields):
    return deploy(plan(InferenceScenario.model_validate({**LLAMA, **fields})), engine)


def _values(argv, flag: str) -> list[str]:
    """The arguments after `flag` up to the next long option (the flag must be there)."""
    argv = list(argv)
    start = argv.index(flag) + 1
    end = next((i for i in range(start, len(argv)) if argv[i].startswith("--")), len(argv))
    return argv[start:end]


def test_vllm_serves_the_planned_slots_rank_and_adapters():
    d = _deploy(lora={"adapters": 3, "max_loras": 2, "adapter_rank": 32, "max_cpu_loras": 3})
    serve = d.launch.serve_argv
    assert _values(serve, "--enable-lora") == []
    assert _values(serve, "--max-loras") == ["2"] and _values(serve, "--max-lora-rank") == ["32"]
    assert _values(serve, "--max-cpu-loras") == ["3"]
    assert _values(serve, "--lora-modules") == ["lora-1=LORA_1_PATH", "lora-2=LORA_2_PATH", "lora-3=LORA_3_PATH"]
    assert any("Replace LORA_1_PATH ... LORA_3_PATH in --lora-modules" in n for n in d.notes)
    assert not any("--max-lora-rank takes" in n for n in d.notes)  # 32 is a rank vLLM takes as it is
    bench = d.launch.benchmark_argv
    assert bench[:3] == ("vllm", "bench", "serve") and _values(bench, "--lora-modules") == [
        "lora-1",
        "lora-2",
        "lora-3",
    ]
    assert "--enable-lora" in d.manifest()


def test_vllm_is_told_the_planners_host_cache_not_its_own_default():
    # vLLM's --max-cpu-loras defaults to --max-loras; the plan keeps every adapter in host memory
    d = _deploy(lora={"adapters": 6})
    serve = d.launch.serve_argv
    assert _values(serve, "--max-loras") == ["1"]  # vLLM's own default slots, as the plan priced them
    assert _values(serve, "--max-cpu-loras") == ["6"]
    assert _values(serve, "--max-lora-rank") == ["16"]


@pytest.mark.parametrize(
    ("rank", "expected"),
    [(1, 1), (2, 8), (8, 8), (9, 16), (17, 32), (100, 128), (257, 320), (321, 512), (512, 512)],
)
def test_vllm_rank_rounds_up_to_an_accepted_rank(rank, expected):
    d = _deploy(lora={"adapters": 2, "adapter_rank": rank})
    assert _values(d.launch.serve_argv, "--max-lora-rank") == [str(expected)]
    rounded = [n for n in d.notes if "--max-lora-rank takes" in n]
    assert bool(rounded) == (rank != expected)
    if rounded:
        assert f"rank {rank} becomes {expected}" in rounded[0]


def test_vllm_v0_has_no_rank_1():
    d = _deploy(runtime="vllm@0.6", lora={"adapters": 2, "adapter_rank": 1})
    assert _values(d.launch.serve_argv, "--max-lora-rank") == ["8"]
    assert round_up_rank(3, (1, 8, 16)) == 8 and round_up_rank(16, (1, 8, 16)) == 16


def test_many_adapters_take_one_placeholder_and_a_note():
    d = _deploy(lora={"adapters": 300, "max_loras": 8})
    serve, bench = d.launch.serve_argv, d.launch.benchmark_argv
    assert _values(serve, "--lora-modules") == ["LORA_MODULES"] and _values(bench, "--lora-modules") == ["LORA_NAMES"]
    assert len(serve) < 60 and _values(serve, "--max-cpu-loras") == ["300"]
    assert any("Replace LORA_MODULES" in n and "300 adapters" in n and "LORA_NAMES" in n for n in d.notes)


def test_sglang_spells_slots_rank_modules_and_paths():
    lora = {"adapters": 4, "max_loras": 3, "adapter_rank": 12, "target_modules": ["q", "v", "down"]}
    d = _deploy(runtime="sglang", lora=lora)
    serve = d.launch.serve_argv
    assert _values(serve, "--enable-lora") == [] and _values(serve, "--max-loras-per-batch") == ["3"]
    assert _values(serve, "--max-lora-rank") == ["12"]  # SGLang takes any rank: no rounding
    assert _values(serve, "--lora-target-modules") == ["q_proj", "v_proj", "down_proj"]
    assert _values(serve, "--lora-paths") == [f"lora-{i}=LORA_{i}_PATH" for i in range(1, 5)]
    assert "--max-loaded-loras" not in serve  # the plan keeps all four in host memory, as SGLang does unbounded
    assert _values(d.launch.benchmark_argv, "--lora-name") == ["lora-1", "lora-2", "lora-3", "lora-4"]
    every = _deploy(runtime="sglang", lora={"adapters": 20})
    assert _values(every.launch.serve_argv, "--max-loras-per-batch") == ["8"]  # SGLang's default slots
    assert _values(every.launch.serve_argv, "--lora-target-modules") == [
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj",
    ]  # fmt: skip


def test_sglang_starts_with_the_adapters_host_memory_keeps():
    d = _deploy(runtime="sglang", lora={"adapters": 6, "max_loras": 2, "max_cpu_loras": 3})
    serve = d.launch.serve_argv
    assert _values(serve, "--max-loaded-loras") == ["3"]
    assert _values(serve, "--lora-paths") == ["lora-1=LORA_1_PATH", "lora-2=LORA_2_PATH", "lora-3=LORA_3_PATH"]
    assert _values(d.launch.benchmark_argv, "--lora-name") == ["lora-1", "lora-2", "lora-3"]
    assert any("--max-loaded-loras" in n and "/load_lora_adapter" in n for n in d.notes)


def test_uneven_traffic_says_the_benchmark_draws_adapters_evenly():
    zipf = _deploy(lora={"adapters": 4, "zipf_exponent": 1.2})
    assert any("uniformly at random" in n and "Zipf law of exponent 1.2" in n for n in zipf.notes)
    shares = _deploy("sglang", lora={"adapters": 2, "traffic_shares": [3, 1]})
    assert any("uniformly at random" in n and "traffic shares" in n for n in shares.notes)
    even = _deploy(lora={"adapters": 4, "traffic_shares": [1, 1, 1, 1]})
    assert not any("uniformly at random" in n for n in even.notes)


def test_tensorrt_llm_pytorch_backend_takes_a_lora_config():
    d = _deploy(runtime="tensorrt-llm", lora={"adapters": 5, "max_loras": 2, "adapter_rank": 24})
    options = dict(d.launch.files)["extra_llm_api_options.yaml"]
    assert "lora_config:" in options and "max_lora_rank: 24" in options
    assert "max_loras: 2" in options and "max_cpu_loras: 5" in options
    modules = ["attn_q", "attn_k", "attn_v", "attn_dense", "mlp_h_to_4h", "mlp_gate", "mlp_4h_to_h"]
    assert all(f'- "{m}"' in options for m in modules)
    assert any("benchmark measures the base model alone" in n for n in d.notes)
    assert not any(flag in d.launch.benchmark_argv for flag in LORA_FLAGS)


def test_tensorrt_llm_engine_backend_says_lora_is_not_carried():
    d = _deploy(runtime="tensorrt-llm-engine", lora={"adapters": 5})
    assert "lora_config" not in dict(d.launch.files)["extra_llm_api_options.yaml"]
    assert any(n.startswith("LoRA is not carried for TensorRT-LLM's TensorRT backend") for n in d.notes)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "tensorrt-llm"])
def test_no_lora_no_lora_flags(engine):
    d = _deploy(engine)
    argv = [*d.launch.serve_argv, *d.launch.benchmark_argv]
    assert not any(flag in argv for flag in LORA_FLAGS)
    assert all("lora" not in body for _, body in d.launch.files)
    assert not any("LoRA" in n or "adapter" in n for n in d.notes)
