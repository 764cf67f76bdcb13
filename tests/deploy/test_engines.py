"""The serve and benchmark commands of hand-checked plans, flag by flag, in each engine's own spelling.

Expected values are the scenario's and the plan's numbers written out: max sequences = ceil(concurrency /
replicas), batched tokens = prefill_chunk_tokens, max model length = prompt + output (uniform lengths: each
rounded up at (1 + range_ratio)). Flag names: the parsers cited in planner/deploy/vllm.py, sglang.py and
tensorrt_llm.py.
"""

from __future__ import annotations

import json

import pytest

from planner.deploy import DeployError, deploy
from planner.inference.scenario import InferenceScenario
from planner.plan import plan

DEEPSEEK = {"model": "deepseek-v3", "gpu": "h200", "num_gpus": 8, "tensor_parallel": 8, "expert_parallel": 8}


def _deploy(engine: str | None = None, **fields):
    return deploy(plan(InferenceScenario.model_validate(fields)), engine)


def _pairs(argv) -> dict[str, str | None]:
    """--flag value pairs (a flag followed by another flag has the value None)."""
    out: dict[str, str | None] = {}
    for i, token in enumerate(argv):
        if token.startswith("--"):
            following = argv[i + 1] if i + 1 < len(argv) else None
            out[token] = None if following is None or following.startswith("--") else following
    return out


def test_deepseek_v3_fp8_on_8_h200_tp8_ep8_under_vllm():
    d = _deploy(**DEEPSEEK)  # the checkpoint stores FP8 (block-scaled): served as stored, no --quantization
    assert d.spec.weight_dtype == "fp8" and d.spec.release == "vllm"
    assert list(d.launch.serve_argv) == [
        "vllm", "serve", "deepseek-ai/DeepSeek-V3", "--host", "0.0.0.0", "--port", "8000",
        "--tensor-parallel-size", "8", "--pipeline-parallel-size", "1", "--enable-expert-parallel",
        "--max-num-seqs", "64",  # concurrency 64 over 1 replica
        "--max-num-batched-tokens", "8192", "--gpu-memory-utilization", "0.9", "--block-size", "16",
        "--kv-cache-dtype", "auto", "--max-model-len", "2560",  # 2048 + 512
        "--enable-chunked-prefill", "--no-enable-prefix-caching",
    ]  # fmt: skip
    bench = _pairs(d.launch.benchmark_argv)
    assert list(d.launch.benchmark_argv[:3]) == ["vllm", "bench", "serve"]
    assert bench["--random-input-len"] == "2048" and bench["--random-output-len"] == "512"
    assert bench["--random-range-ratio"] == "0" and bench["--request-rate"] == "inf"
    assert bench["--max-concurrency"] == "64" and bench["--num-prompts"] == "640"  # closed loop, 10 per sequence
    assert bench["--result-filename"] == "headroom-vllm-deepseek-v3-tp8-ep8-rateinf-conc64.json"
    assert "--save-result" in bench and "--ignore-eos" in bench


def test_the_v0_release_spells_its_own_flags_and_says_what_it_lacks():
    d = _deploy(**DEEPSEEK, runtime="vllm@0.7.3")  # resolves to the vllm@0.6 profile (V0 engine)
    flags = _pairs(d.launch.serve_argv)
    assert d.spec.release == "vllm@0.6"
    assert flags["--enable-chunked-prefill"] == "False"  # V0 turns chunked prefill off for MLA (PR #12642)
    assert "--enable-expert-parallel" not in flags and "--data-parallel-size" not in flags
    assert any("no expert-parallel setting" in n for n in d.notes)
    assert d.launch.benchmark_argv[:2] == ("python", "benchmarks/benchmark_serving.py")
    assert d.launch.image == "vllm/vllm-openai:v0.7.3"


def test_experts_spread_over_replicas_make_one_data_parallel_server():
    d = _deploy(**{**DEEPSEEK, "tensor_parallel": 1}, concurrency=64)  # 8 replicas of 1 GPU share the experts
    vllm = _pairs(d.launch.serve_argv)
    assert vllm["--tensor-parallel-size"] == "1" and vllm["--data-parallel-size"] == "8"
    assert "--enable-expert-parallel" in vllm and vllm["--max-num-seqs"] == "8"  # 64 over 8 ranks
    assert (d.launch.servers, d.launch.gpus_per_server) == (1, 8)
    sg = _pairs(_deploy("sglang", **{**DEEPSEEK, "tensor_parallel": 1}).launch.serve_argv)
    assert (sg["--tp-size"], sg["--dp-size"], sg["--ep-size"]) == ("8", "8", "8")
    assert "--enable-dp-attention" in sg and sg["--max-running-requests"] == "64"  # 8 per rank x 8 ranks
    trt = _deploy("tensorrt-llm", **{**DEEPSEEK, "tensor_parallel": 1}).launch
    assert _pairs(trt.serve_argv)["--tp_size"] == "8" and "enable_attention_dp: true" in trt.files[0][1]


LLAMA_SGLANG = {
    "model": "llama-3.1-8b",
    "gpu": "h100-sxm",
    "num_gpus": 1,
    "tensor_parallel": 1,
    "runtime": "sglang@0.4",
    "concurrency": 32,
    "prompt_tokens": 1024,
    "output_tokens": 256,
    "kv_cache_dtype": "fp8",
    "gpu_memory_utilization": 0.85,
    "traffic": {"requests_per_second": 4, "num_requests": 500, "lengths": "uniform", "range_ratio": 0.2, "seed": 7},
}


def test_llama_3_1_8b_on_one_h100_under_sglang_0_4():
    d = _deploy(**LLAMA_SGLANG)
    assert d.spec.engine == "sglang" and d.spec.release == "sglang"
    assert list(d.launch.serve_argv) == [
        "python", "-m", "sglang.launch_server", "--model-path", "meta-llama/Llama-3.1-8B", "--host", "0.0.0.0",
        "--port", "30000", "--tp-size", "1", "--mem-fraction-static", "0.85", "--max-running-requests", "32",
        "--chunked-prefill-size", "8192", "--max-prefill-tokens", "8192", "--kv-cache-dtype", "fp8_e4m3",
        "--context-length", "1537",  # ceil(1024 x 1.2) + ceil(256 x 1.2) = 1229 + 308
        "--disable-radix-cache",
    ]  # fmt: skip
    bench = _pairs(d.launch.benchmark_argv)
    # bench_serving draws from [int(L x ratio), L]: L = ceil(1024 x 1.2) = 1229, ratio 0.8 / 1.2 = 0.6667
    assert (bench["--random-input-len"], bench["--random-output-len"]) == ("1229", "308")
    assert bench["--random-range-ratio"] == "0.6667" and int(1229 * 0.6667) == 819  # floor(1024 x 0.8)
    assert (bench["--request-rate"], bench["--num-prompts"], bench["--seed"]) == ("4", "500", "7")
    assert bench["--output-file"].endswith(".jsonl") and "--max-concurrency" not in bench


def test_speculative_decoding_in_each_engines_spelling():
    spec = {"method": "draft_model", "draft_model": "llama-3.2-1b", "num_speculative_tokens": 4}
    fields = {"model": "llama-3.1-70b", "num_gpus": 4, "tensor_parallel": 4, "speculative": spec}
    vllm = _pairs(_deploy(**fields).launch.serve_argv)
    assert json.loads(vllm["--speculative-config"] or "") == {
        "method": "draft_model",
        "model": "meta-llama/Llama-3.2-1B",
        "num_speculative_tokens": 4,
    }
    v0 = _pairs(_deploy(**fields, runtime="vllm@0.6").launch.serve_argv)
    assert (v0["--speculative-model"], v0["--num-speculative-tokens"]) == ("meta-llama/Llama-3.2-1B", "4")
    sg = _pairs(_deploy("sglang", **fields).launch.serve_argv)
    assert sg["--speculative-algorithm"] == "STANDALONE"
    assert (sg["--speculative-num-steps"], sg["--speculative-eagle-topk"], sg["--speculative-num-draft-tokens"]) == (
        "4",
        "1",
        "5",
    )
    trt = _deploy("tensorrt-llm", **fields).launch.files[0][1]
    assert 'decoding_type: "Draft_Target"' in trt and "max_draft_len: 4" in trt
    mtp = _deploy(**DEEPSEEK, speculative={"method": "mtp", "num_speculative_tokens": 1})
    assert json.loads(_pairs(mtp.launch.serve_argv)["--speculative-config"] or "")["method"] == "deepseek_mtp"
    eagle = _deploy(**{**fields, "speculative": {"method": "eagle"}})
    assert "EAGLE_HEAD_PATH" in eagle.serve_command and any("EAGLE_HEAD_PATH" in n for n in eagle.notes)


def test_a_feature_without_a_flag_is_a_note():
    d = _deploy(model="llama-3.1-8b", num_gpus=1, tensor_parallel=1, kv_cache_dtype="int8")
    assert _pairs(d.launch.serve_argv)["--kv-cache-dtype"] == "auto"
    assert any("no int8 KV cache" in n for n in d.notes)
    q = _deploy(model="llama-3.1-8b", num_gpus=1, tensor_parallel=1, weight_dtype="int4")
    assert "--quantization" not in q.serve_command and any("quantized to int4" in n for n in q.notes)
    online = _deploy(model="llama-3.1-8b", num_gpus=1, tensor_parallel=1, weight_dtype="fp8")
    assert _pairs(online.launch.serve_argv)["--quantization"] == "fp8"


def test_a_size_only_model_needs_a_path_and_prefix_caching_follows_the_plan():
    d = _deploy(model="dense-70b", prefix_cache_hit_rate=0.5)
    assert d.launch.serve_argv[2] == "MODEL_PATH" and any("MODEL_PATH" in n for n in d.notes)
    assert "--enable-prefix-caching" in d.launch.serve_argv


def test_runtimes_without_commands_say_so():
    with pytest.raises(DeployError, match="has no deploy command"):
        _deploy(model="llama-3.1-8b", num_gpus=1, tensor_parallel=1, runtime="llama.cpp")
    d = _deploy("vllm", model="llama-3.1-8b", num_gpus=1, tensor_parallel=1, runtime="llama.cpp")
    assert any("sized under llama.cpp" in n for n in d.notes)
