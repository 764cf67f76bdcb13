"""The KV cache a prefill writes: sliding windows, token by token (not whole blocks), only what it computes."""

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


def test_prefill_writes_the_tokens_it_computes_not_whole_blocks():
    """A write fills the slots it uses: a 6,150-token prompt writes 6,150 tokens' KV whatever the block size (the
    16-token blocks' 10 padding slots are allocated, not written); a prefix-cache hit writes only the new
    tokens' KV: 42 layers x (6,150 - 3,075) tokens x 4,096 elements x 2 B = 1,057,996,800 B less."""
    prompt = 6150
    one = plan(gemma(prompt_tokens=prompt, kv_block_tokens=1, honor_sliding_window=False)).performance.prefill
    blocks = plan(gemma(prompt_tokens=prompt, kv_block_tokens=16, honor_sliding_window=False)).performance.prefill
    assert blocks.bytes == one.bytes
    half = plan(gemma(prompt_tokens=prompt, honor_sliding_window=False, prefix_cache_hit_rate=0.5)).performance.prefill
    # both read the weights once (one chunk each); the rest is the KV each writes
    assert one.bytes - half.bytes == 1_057_996_800
    assert one.bytes - 42 * 6150 * 4096 * 2 == half.bytes - 42 * 3075 * 4096 * 2
