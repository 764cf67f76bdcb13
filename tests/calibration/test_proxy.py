"""The proxy model's layer variants keep exactly the bytes the engine's terms count, and its sizing
respects the time budget and the memory cap."""

from __future__ import annotations

import pytest

from planner.calibration import proxy
from planner.calibration.context import ProfileContext
from planner.calibration.device import make_backend
from planner.calibration.errors import ProfileUnavailable
from planner.calibration.predict import ProxyGeometry
from planner.calibration.sizing import CPU_POINTS, GPU_POINTS, Rates, size_proxy
from planner.calibration_record import ProfileSettings
from planner.model.architecture import ModelArchitecture
from planner.model.catalog import resolve_model


def _qk_norm_model() -> ModelArchitecture:
    data = resolve_model("qwen2.5-0.5b").model_dump(exclude=set(ModelArchitecture.model_computed_fields))
    data.update(name="qwen with qk-norm", qk_norm=True)
    return ModelArchitecture.model_validate(data)


VARIANTS = {
    "gpt2": lambda: resolve_model("gpt2"),  # LayerNorm with bias, GeLU MLP, biases everywhere, MHA
    "gemma-2-2b": lambda: resolve_model("gemma-2-2b"),  # 4 norms per layer, head_dim 256, hidden != heads x dim
    "qk-norm": _qk_norm_model,  # Qwen3-style RMSNorm over q and k heads, GQA 7:1
    "phi-3-mini-4k": lambda: resolve_model("phi-3-mini-4k"),  # MHA (kv heads = heads)
}


@pytest.fixture(scope="module")
def cpu():
    backend = make_backend("cpu")
    return backend, ProfileContext(backend, 30.0, 1 << 32)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_layer_variants_keep_exactly_the_engines_bytes(cpu, variant, dtype):
    backend, ctx = cpu
    source = VARIANTS[variant]()
    # The narrowest copy: the tensors each layer keeps do not depend on the width, and it is fast.
    arch = proxy.proxy_architecture(source, 1, proxy.width_divisors(source)[-1])
    g = ProxyGeometry(arch, dtype)
    model = proxy.ProxyModel.build(backend, arch, dtype, 64)
    assert model.parameter_bytes() == g.weight_bytes()
    train = proxy.run_train(ctx, model, 2, 24, 0.0)
    for key, predicted in g.training_memory(2, 24).items():
        assert train.tensor_bytes[key] == predicted, key
    decode = proxy.run_decode(ctx, model, 3, 20, 0.0)
    assert decode.tensor_bytes["kv_cache"] == g.kv_bytes(3, 21)
    prefill = proxy.run_prefill(ctx, model, 24, 0.0)
    assert prefill.tensor_bytes["kv_cache"] == g.kv_bytes(1, 24)
    assert train.breakdown_seconds.keys() == {"forward", "backward", "optimizer"}
    assert all(p.requires_grad is False for p in model.parameters())  # training state is undone


def test_the_training_step_updates_the_weights(cpu):
    backend, ctx = cpu
    arch = proxy.proxy_architecture(resolve_model("qwen2.5-0.5b"), 1, 14)
    model = proxy.ProxyModel.build(backend, arch, "bf16", 32)
    before = model.layers[0]["wq"].clone()
    proxy.run_train(ctx, model, 1, 16, 0.0)
    assert not backend.torch.equal(before, model.layers[0]["wq"])


@pytest.mark.parametrize(
    "model_id, words", [("deepseek-v2-lite", "latent attention"), ("mixtral-8x7b", "mixture-of-experts")]
)
def test_unsupported_architectures_say_what_to_use_instead(model_id, words):
    with pytest.raises(ProfileUnavailable, match=words) as info:
        proxy.check_supported(resolve_model(model_id))
    assert "llama-3.1-8b" in str(info.value)


def test_narrowing_keeps_head_dim_and_the_head_ratio():
    llama = resolve_model("llama-3.1-8b")
    assert proxy.width_divisors(llama) == [1, 2, 4, 8, 16, 32]
    narrow = proxy.proxy_architecture(llama, 2, 4)
    assert (
        narrow.num_layers,
        narrow.hidden_size,
        narrow.num_attention_heads,
        narrow.num_kv_heads,
        narrow.head_dim,
        narrow.intermediate_size,
    ) == (2, 1024, 8, 2, 128, 3584)
    assert proxy.proxy_architecture(llama, 2, 16).num_kv_heads == 1  # fewer KV heads than the divisor
    probe = proxy.probe_architecture(llama, 4)
    assert (probe.hidden_size, probe.num_attention_heads, probe.num_kv_heads) == (128, 1, 1)


def _size(rates, budget=10.0, cap=1 << 40, device="cpu", model="llama-3.1-8b", **settings):
    arch = resolve_model(model)
    return size_proxy(arch, ProfileSettings(model=model, **settings), device, "bf16", rates, budget, cap, model)


def test_a_fast_device_gets_the_real_width_and_the_default_operating_points():
    spec = _size(Rates(square=5e14, skinny=1e14, bandwidth=3e12), device="cuda")
    assert spec.width_divisor == 1 and spec.architecture.hidden_size == 4096
    assert spec.architecture.num_layers == GPU_POINTS["layers"]
    assert spec.prefill_tokens == GPU_POINTS["prefill"] and spec.train_tokens == GPU_POINTS["train_tokens"]
    assert not any("capped" in c for c in spec.caps)


def test_a_slow_device_gets_shorter_sequences_or_a_narrower_model_and_says_so():
    shorter = _size(Rates(square=2e11, skinny=5e10, bandwidth=2e10), budget=1.5, model="qwen2.5-0.5b")
    assert shorter.width_divisor == 1 and shorter.prefill_tokens < CPU_POINTS["prefill"]
    assert "sequence lengths divided by" in " ".join(shorter.caps)
    narrower = _size(Rates(square=5e10, skinny=1e10, bandwidth=1e10), budget=2.0)
    assert narrower.width_divisor > 1
    assert "width capped 4096" in " ".join(narrower.caps)


def test_the_memory_cap_narrows_the_proxy():
    fast = Rates(square=5e14, skinny=1e14, bandwidth=3e12)
    wide = _size(fast, device="cuda")
    capped = _size(fast, device="cuda", cap=256 << 20)
    assert capped.architecture.hidden_size < wide.architecture.hidden_size


def test_an_impossible_budget_still_runs_the_smallest_proxy_and_warns():
    spec = _size(Rates(square=1e3, skinny=1e3, bandwidth=1e3), budget=0.01)
    assert spec.architecture.num_layers == 1
    assert any("overruns" in c for c in spec.caps)


def test_measure_groups_short_calls_and_reports_the_best_sample(cpu):
    _, ctx = cpu
    timing = ctx.measure(lambda: None, 0.02, min_reps=3)
    assert timing.reps > 3  # microsecond calls are timed in groups
    assert 0 < timing.best_seconds <= timing.seconds
