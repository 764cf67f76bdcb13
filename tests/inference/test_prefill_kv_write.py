"""The KV cache a prefill writes, as the engine stores it: sliding windows and paged blocks."""

from __future__ import annotations

from planner import InferenceScenario, plan
from planner.model.catalog import resolve_model


def gemma(**overrides) -> InferenceScenario:
    arch = resolve_model("gemma-2-9b")
    # The hand arithmetic below rests on these: 42 layers, every other one sliding over 4,096 tokens,
    # 8 KV heads x 256 = 2 x 8 x 256 = 4,096 KV elements per token and layer.
    assert (arch.num_layers, arch.sliding_window_layers, arch.sliding_window) == (42, 21, 4096)
    assert (arch.num_kv_heads, arch.head_dim) == (8, 256)
    fields = dict(model="gemma-2-9b", num_gpus=1, tensor_parallel=1, prompt_tokens=6144, output_tokens=128)
    return InferenceScenario(**{**fields, **overrides})


def test_prefill_writes_the_whole_prompt_when_the_engine_ignores_sliding_windows():
    honored = plan(gemma(honor_sliding_window=True)).performance.prefill
    ignored = plan(gemma(honor_sliding_window=False)).performance.prefill
    # Only the 21 sliding layers differ: they keep 4,096 tokens instead of 6,144.
    # 21 layers x (6,144 - 4,096) tokens x 4,096 elements x 2 B (bf16) = 352,321,536 B
    assert ignored.bytes - honored.bytes == 352_321_536
    assert ignored.flops == honored.flops  # the compute is the same; only the cache layout differs


def test_prefill_writes_whole_kv_blocks():
    prompt = 6150  # 385 blocks of 16 tokens = 6,160 tokens: 10 tokens of padding
    one = plan(gemma(prompt_tokens=prompt, kv_block_tokens=1, honor_sliding_window=False)).performance.prefill
    blocks = plan(gemma(prompt_tokens=prompt, kv_block_tokens=16, honor_sliding_window=False)).performance.prefill
    # 42 layers x 10 tokens x 4,096 elements x 2 B = 3,440,640 B
    assert blocks.bytes - one.bytes == 3_440_640
