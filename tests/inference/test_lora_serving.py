"""Multi-LoRA serving in the static plan (`planner.inference.adapters`): the adapters' bytes against real torch
modules and a hand-worked 70B figure, vLLM's per-GPU slot layout, Che's LRU approximation against a Monte Carlo
LRU, the slots in the memory breakdown and the KV pool, the adapters' kernels in the one step composition, and
the sentences that refuse what cannot be planned."""

from __future__ import annotations

import json
import random
import struct
from collections import OrderedDict
from dataclasses import replace

import numpy as np
import pytest
import torch
from pydantic import ValidationError
from torch import nn

from planner import plan
from planner.errors import PlanningError, explain
from planner.inference.adapters import (
    ADAPTER_STORAGE_BYTES_PER_SECOND,
    ALL_LINEAR,
    AdapterInputs,
    LoraAdapters,
    adapter_inputs,
    check_adapters_fit,
    lru_miss_probability,
)
from planner.inference.inputs import InferenceInputs, ReplicaShape
from planner.inference.memory import headroom, inference_memory
from planner.inference.metrics import decode_read_weight_bytes, inference_metrics
from planner.inference.scenario import InferenceScenario
from planner.inference.scenario_inputs import scenario_inputs
from planner.inference.steps import StepContext, adapter_kernel_seconds, decode_step, decode_work, prefill_step
from planner.inference.traffic import TrafficEngine
from planner.inference.workload import Traffic
from planner.model.hf_config import architecture_from_config
from planner.physics.lora import lora_adapter_elements, lora_forward_flops_per_token
from tests.inference.test_step_composition import _static
from tests.model.builders import build_glm4_moe
from tests.reference_data import require_reference
from tests.validation.test_param_counts_torch import build_llama_family

HF_CONFIGS = require_reference() / "hf_configs"
REL = 1e-9
BF16 = 2.0
LORA = {"adapters": 10, "max_loras": 4}  # uniform traffic over 10 adapters, 4 GPU slots
BASE = InferenceScenario()  # Llama 3.1 70B, 4x H100, TP4, batch cap 64
WITH_LORA = InferenceScenario(lora=LORA)

# transformers' module names of the LoRA targets
HF_TARGETS = {
    "q_proj": "q",
    "k_proj": "k",
    "v_proj": "v",
    "o_proj": "o",
    "gate_proj": "gate",
    "up_proj": "up",
    "down_proj": "down",
}


def _hf_config(name: str, **overrides) -> dict:
    return {**json.loads((HF_CONFIGS / f"{name}.json").read_text()), **overrides}


def _torch_model(cfg: dict, device="meta") -> nn.Module:
    """The model as real torch modules (the repository's builders of the Hugging Face layer layouts, checked
    against transformers' own classes in tests/model/test_reference_configs.py); meta: shapes only."""
    build = build_glm4_moe if cfg["model_type"] == "glm4_moe" else build_llama_family
    with torch.device(device):
        return build(cfg)


def _lora_modules(model: nn.Module, targets, rank: int, device="meta") -> list[nn.Module]:
    """PEFT's layout: for every targeted nn.Linear (in -> out), A = Linear(in, r) and B = Linear(r, out), bf16.
    Routed experts, fused into 3-D parameters as transformers v5 and vLLM hold them, are no nn.Linear: none."""
    out = []
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and HF_TARGETS.get(name.rsplit(".", 1)[-1]) in targets:
            out.append(nn.Linear(module.in_features, rank, bias=False, device=device, dtype=torch.bfloat16))
            out.append(nn.Linear(rank, module.out_features, bias=False, device=device, dtype=torch.bfloat16))
    return out


def _numel(modules) -> int:
    return sum(p.numel() for m in modules for p in m.parameters())


def _adapters(arch, lora: LoraAdapters, tp=1, pp=1, runtime="vllm") -> AdapterInputs:
    return adapter_inputs(lora, arch, runtime, tp, pp, BF16, 64e9)


# ------------------------------------------------------------------------------- adapter bytes vs torch


@pytest.mark.parametrize(
    "name, overrides",
    [
        ("qwen3-8b", {}),  # dense GQA: k/v out = 8 x 128, q out = 32 x 128
        # MoE with a shared expert and a first dense layer; three layers keep the meta build quick
        ("glm-4.5-air", {"num_hidden_layers": 3}),
    ],
)
@pytest.mark.parametrize("targets", [ALL_LINEAR, ("q", "v"), ("o", "down"), ("gate", "up")])
def test_adapter_elements_are_the_lora_modules_of_the_torch_model(name, overrides, targets):
    cfg = _hf_config(name, **overrides)
    arch = architecture_from_config(cfg)
    modules = _lora_modules(_torch_model(cfg), targets, rank=16)
    assert modules, "the targets name no projection of the model"
    expected = _numel(modules)
    assert lora_adapter_elements(arch, 16, targets, 1, 1, 1, experts="skip") == expected
    lora = LoraAdapters(adapters=3, adapter_rank=16, target_modules=targets, max_loras=3)
    adapters = _adapters(arch, lora)
    bf16_bytes = sum(p.numel() * p.element_size() for m in modules for p in m.parameters())
    assert adapters.file_bytes == bf16_bytes == 2 * expected
    assert adapters.slot_bytes == bf16_bytes  # TP1, PP1: one slot is one whole adapter
    assert adapters.flops_per_token == 2 * expected  # x A, then B: 2 FLOPs per adapter element


@pytest.mark.parametrize("tp", [2, 4, 8, 16])
def test_a_gpu_slot_is_vllm_s_sharded_lora_buffers(tp):
    """vLLM's per-GPU buffers for one slot, from each projection of the torch model: column-parallel layers
    (`ColumnParallelLinearWithLoRA`, q/k/v/gate/up) keep lora_a (r x in) whole and shard lora_b (out / tp x r);
    K/V keep at least one head per GPU (Qwen3-8B has 8 KV heads: TP16 replicates them); row-parallel layers
    (`RowParallelLinearWithLoRA`, o/down) shard lora_a (r x in / tp) and keep lora_b (out x r) whole."""
    cfg = _hf_config("qwen3-8b")
    arch = architecture_from_config(cfg)
    kv_heads, head_dim, rank = cfg["num_key_value_heads"], cfg["head_dim"], 16
    buffers = []
    for name, module in _torch_model(cfg).named_modules():
        target = HF_TARGETS.get(name.rsplit(".", 1)[-1]) if isinstance(module, nn.Linear) else None
        if target in ("o", "down"):
            buffers += [(rank, module.in_features // tp), (module.out_features, rank)]
        elif target in ("k", "v"):
            buffers += [(rank, module.in_features), (max(1, kv_heads // tp) * head_dim, rank)]
        elif target is not None:
            buffers += [(rank, module.in_features), (module.out_features // tp, rank)]
    elements = sum(torch.empty(shape, device="meta").numel() for shape in buffers)
    assert len(buffers) == 2 * 7 * cfg["num_hidden_layers"]
    assert lora_adapter_elements(arch, rank, ALL_LINEAR, tp, 1, 1, experts="skip") == elements
    slot = _adapters(arch, LoraAdapters(adapters=2, max_loras=2), tp=tp)
    assert slot.slot_bytes == 2 * elements


def test_routed_experts_carry_adapters_only_when_asked():
    """Training's LoRA (experts="include") puts A and B on every routed expert's gate, up and down; serving
    ("skip") leaves them out; "only" is the experts' share. The model holds the experts fused into 3-D tensors
    (E x 2I x h, E x h x I): one LoRA pair per expert and projection built from those shapes."""
    cfg = _hf_config("glm-4.5-air", num_hidden_layers=3)
    arch = architecture_from_config(cfg)
    model = _torch_model(cfg)
    dense = _numel(_lora_modules(model, ALL_LINEAR, 8))
    experts = []
    for name, p in model.named_parameters():
        if name.endswith("mlp.experts.gate_up_proj"):
            e, two_i, h = p.shape
            for _ in range(e):
                for _ in range(2):  # gate and up: h -> I
                    experts += [nn.Linear(h, 8, bias=False, device="meta"), nn.Linear(8, two_i // 2, device="meta")]
        elif name.endswith("mlp.experts.down_proj"):
            e, h, i = p.shape
            for _ in range(e):
                experts += [nn.Linear(i, 8, bias=False, device="meta"), nn.Linear(8, h, bias=False, device="meta")]
    routed = sum(m.weight.numel() for m in experts)  # weights only: LoRA has no biases
    assert routed > 0
    assert lora_adapter_elements(arch, 8, ALL_LINEAR, 1, 1, 1, experts="only") == routed
    assert lora_adapter_elements(arch, 8, ALL_LINEAR, 1, 1, 1) == dense + routed
    assert lora_adapter_elements(arch, 8, ALL_LINEAR, 1, 1, 1, experts="skip") == dense


def test_an_adapter_file_holds_exactly_its_bytes(tmp_path):
    """A tiny Llama-like GQA model built on the CPU; its LoRA A/B saved as a real safetensors checkpoint: the
    tensor data (the file less its 8-byte length and JSON header) is `AdapterInputs.file_bytes`."""
    safetensors_torch = pytest.importorskip("safetensors.torch")
    cfg = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": 64,
        "intermediate_size": 176,
        "num_hidden_layers": 3,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 8,
        "vocab_size": 128,
        "max_position_embeddings": 256,
        "torch_dtype": "bfloat16",
    }
    arch = architecture_from_config(cfg)
    model = _torch_model(cfg, device="cpu")
    modules = _lora_modules(model, ALL_LINEAR, rank=4, device="cpu")
    tensors = {f"lora.{n}": m.weight.detach().contiguous() for n, m in enumerate(modules)}
    path = tmp_path / "adapter_model.safetensors"
    safetensors_torch.save_file(tensors, str(path))
    raw = path.read_bytes()
    (header,) = struct.unpack("<Q", raw[:8])
    data_bytes = len(raw) - 8 - header
    # by hand: per layer r (in + out) for q (64 + 64), k and v (64 + 2 x 8 each), o (64 + 64), gate and up
    # (64 + 176 each), down (176 + 64) = 4 x (128 + 80 + 80 + 128 + 3 x 240) = 4 x 1136 = 4544; 3 layers: 13,632
    assert _numel(modules) == 13_632
    adapters = _adapters(arch, LoraAdapters(adapters=2, adapter_rank=4, max_loras=2))
    assert adapters.file_bytes == data_bytes == 2 * 13_632
    assert adapters.storage_read_seconds == pytest.approx(data_bytes / ADAPTER_STORAGE_BYTES_PER_SECOND, rel=REL)


# --------------------------------------------------------------------------- the 70B adapter by hand

# Llama 3.1 70B: h = 8192, 64 query heads and 8 KV heads of 128, MLP 28672, 80 layers. Per layer r (in + out):
#   q 8192 + 8192 = 16384, k and v 8192 + 1024 = 9216 each, o 8192 + 8192 = 16384,
#   gate and up 8192 + 28672 = 36864 each, down 28672 + 8192 = 36864
#   = 2 x 16384 + 2 x 9216 + 3 x 36864 = 161,792 -> x 16 x 80 layers = 207,093,760 parameters (~207M).
LLAMA70_RANK16 = 207_093_760
# One GPU slot, as vLLM lays out its buffers (column-parallel q/k/v/gate/up keep lora_a (r x in) whole and shard
# lora_b (out / tp x r); row-parallel o/down shard lora_a (r x in / tp) and keep lora_b (out x r) whole):
#   TP4: q 8192 + 2048, k/v 8192 + 256 each, o 2048 + 8192, gate/up 8192 + 7168 each, down 7168 + 8192
#        = 2 x 10240 + 2 x 8448 + 3 x 15360 = 83,456 -> x 16 x 80 = 106,823,680 elements, x 2 bytes
#   TP2: q 8192 + 4096, k/v 8192 + 512, o 4096 + 8192, gate/up 8192 + 14336, down 14336 + 8192
#        = 2 x 12288 + 2 x 8704 + 3 x 22528 = 109,568 -> x 16 x 80 = 140,247,040 elements
#   TP16 (past the 8 KV heads, vLLM replicates them: k/v keep one head of 128):
#        q 8192 + 512, k/v 8192 + 128, o 512 + 8192, gate/up 8192 + 1792, down 1792 + 8192
#        = 2 x 8704 + 2 x 8320 + 3 x 9984 = 64,000 -> x 16 x 80 = 81,920,000 elements
SLOT_ELEMENTS = {1: LLAMA70_RANK16, 2: 140_247_040, 4: 106_823_680, 16: 81_920_000}


def test_llama_70b_rank_16_adapter_by_hand():
    arch = BASE.architecture()
    assert lora_adapter_elements(arch, 16, ALL_LINEAR, 1, 1, 1, experts="skip") == LLAMA70_RANK16
    for tp, elements in SLOT_ELEMENTS.items():
        assert lora_adapter_elements(arch, 16, ALL_LINEAR, tp, 1, 1, experts="skip") == elements, tp
    lora = LoraAdapters(adapters=10, adapter_rank=16, max_loras=4)
    for tp in (2, 4):
        a = _adapters(arch, lora, tp=tp)
        assert a.slot_bytes == 2 * SLOT_ELEMENTS[tp]
        assert a.file_bytes == 2 * LLAMA70_RANK16  # the checkpoint is whole whatever the layout
        assert a.flops_per_token == 2 * SLOT_ELEMENTS[tp]
        assert a.host_copy_seconds == pytest.approx(2 * SLOT_ELEMENTS[tp] / 64e9, rel=REL)
        # one shrink and one expand launch for each of qkv_proj, o_proj, gate_up_proj, down_proj
        assert a.kernels_per_layer == 8
    # PP2 at TP4: the stage holds 40 of the 80 layers
    assert _adapters(arch, lora, tp=4, pp=2).slot_bytes == SLOT_ELEMENTS[4]
    # a token's forward through one layer of the whole model: 2 r (in + out) per projection
    assert lora_forward_flops_per_token(arch, 16, ALL_LINEAR, False) == 2 * LLAMA70_RANK16 / 80


def test_experts_carry_no_serving_slot_and_their_layers_fewer_kernels():
    """Mixtral (routed experts only): the slots hold attention's adapters alone, two kernel groups per layer;
    GLM-4.5-Air's MoE layers keep their shared expert's MLP groups."""
    mixtral = InferenceScenario(model="mixtral-8x7b").architecture()
    lora = LoraAdapters(adapters=4, max_loras=4)
    a = _adapters(mixtral, lora)
    attention = lora_adapter_elements(mixtral, 16, ("q", "k", "v", "o"), 1, 1, 1)
    assert a.slot_bytes == 2 * attention
    assert a.kernels_per_layer == 4
    glm = architecture_from_config(_hf_config("glm-4.5-air"))
    assert _adapters(glm, lora).kernels_per_layer == 8
    assert _adapters(glm, LoraAdapters(adapters=4, target_modules=("q", "v"))).kernels_per_layer == 2


# -------------------------------------------------------------------------- Che's approximation vs LRU


def _zipf(n: int, s: float) -> np.ndarray:
    p = 1.0 / np.arange(1, n + 1) ** s
    return p / p.sum()


def _lru_miss_rate(shares: np.ndarray, slots: int, draws: int, seed: int) -> float:
    """A real LRU of `slots` entries under independent requests drawn from the shares."""
    rng = np.random.default_rng(seed)
    cache: OrderedDict[int, None] = OrderedDict()
    misses = 0
    warm = draws // 10
    for t, item in enumerate(rng.choice(len(shares), size=draws + warm, p=shares).tolist()):
        if item in cache:
            cache.move_to_end(item)
            continue
        if t >= warm:
            misses += 1
        cache[item] = None
        if len(cache) > slots:
            cache.popitem(last=False)
    return misses / draws


@pytest.mark.parametrize("n, s, slots", [(20, 0.8, 5), (20, 1.2, 3), (50, 1.0, 10), (12, 0.0, 4)])
def test_che_s_approximation_matches_a_monte_carlo_lru(n, s, slots):
    shares = _zipf(n, s)
    che = lru_miss_probability(shares, slots)
    simulated = _lru_miss_rate(shares, slots, 200_000, seed=n + slots)
    assert che == pytest.approx(simulated, abs=0.02)
    assert 0 < che < 1
    assert lru_miss_probability(shares, n) == 0.0  # every adapter fits: no misses


def test_che_is_exact_for_even_traffic_and_miss_probabilities_use_both_caches():
    # even traffic: n (1 - exp(-T / n)) = c gives a hit of c / n for every adapter, the exact LRU answer
    a = _adapters(BASE.architecture(), LoraAdapters(adapters=10, max_loras=4, max_cpu_loras=5))
    gpu, host = a.miss_probabilities()
    assert gpu == pytest.approx(0.6, abs=1e-9)
    assert host == pytest.approx(0.5, abs=1e-9)
    assert a.expected_load_seconds() == pytest.approx(
        0.6 * a.host_copy_seconds + 0.5 * a.file_bytes / ADAPTER_STORAGE_BYTES_PER_SECOND, rel=REL
    )
    skewed = _adapters(BASE.architecture(), LoraAdapters(adapters=10, max_loras=4, zipf_exponent=1.5))
    assert skewed.miss_probabilities()[0] < gpu  # popular adapters stay resident
    assert skewed.miss_probabilities()[1] == 0.0  # the host keeps every adapter by default


@pytest.mark.parametrize("s", [0.0, 1.0])
def test_expected_distinct_adapters_match_sampled_batches(s):
    arch = BASE.architecture()
    a = _adapters(arch, LoraAdapters(adapters=20, max_loras=20, zipf_exponent=s))
    rng = np.random.default_rng(5)
    for batch in (1, 4, 16, 64):
        draws = np.sort(rng.choice(20, size=(20_000, batch), p=a.shares), axis=1)
        distinct = 1 + (np.diff(draws, axis=1) != 0).sum(axis=1)
        assert a.expected_distinct(batch) == pytest.approx(distinct.mean(), abs=0.05), batch
    assert a.expected_distinct(1) == pytest.approx(1.0, rel=1e-12)
    # clipped at the slots (the batch may hold no more), and it broadcasts
    few = _adapters(arch, LoraAdapters(adapters=20, max_loras=3, zipf_exponent=s))
    assert few.expected_distinct(64) == 3
    row = few.expected_distinct(np.array([1.0, 2.0, 64.0]))
    assert row.shape == (3,) and row[-1] == 3 and row[0] == pytest.approx(1.0)


def test_thousands_of_adapters_are_summed_in_bins_without_losing_accuracy():
    arch = BASE.architecture()
    a = _adapters(arch, LoraAdapters(adapters=5000, max_loras=4096, zipf_exponent=1.0))
    p = _zipf(5000, 1.0)
    for batch in (8, 64, 512):
        exact = float(np.sum(1 - (1 - p) ** batch))
        assert a.expected_distinct(batch) == pytest.approx(exact, rel=0.01)


# ---------------------------------------------------------------------------------------------- memory


def _memory(scenario: InferenceScenario):
    i = scenario_inputs(scenario)
    shape = ReplicaShape.of(i.arch, i.inputs, i.hw)
    memory = inference_memory(i.arch, i.counts, i.hw, i.inputs, shape, i.draft)
    return i, shape, memory


@pytest.mark.parametrize("runtime", ["vllm", "sglang"])
def test_the_slots_are_a_memory_component_taken_from_the_kv_pool(runtime):
    base = InferenceScenario(runtime=runtime)
    lora = InferenceScenario(runtime=runtime, lora=LORA)
    i0, shape0, m0 = _memory(base)
    i1, shape1, m1 = _memory(lora)
    slot_bytes = 2 * SLOT_ELEMENTS[4]
    assert "lora_adapters_bytes" not in m0.components() and m0.lora_adapters_bytes == 0
    assert m1.components()["lora_adapters_bytes"] == 4 * slot_bytes == 854_589_440
    assert i1.inputs.adapters is not None and i1.inputs.adapters.slots == 4
    # everything else is as without adapters; the KV pool gives up exactly the slots
    for name, value in m0.components().items():
        assert m1.components()[name] == value, name
    assert m1.total_bytes == pytest.approx(m0.total_bytes + 4 * slot_bytes, rel=REL)
    assert m1.kv_room_bytes == pytest.approx(m0.kv_room_bytes - 4 * slot_bytes, rel=REL)
    # TP4: 2 (K, V) x 80 layers x 2 KV heads x 128 x 2 bytes = 81,920 bytes a token; vLLM's blocks hold 16 tokens,
    # SGLang's pages 1
    block_bytes = 2 * 80 * 2 * 128 * 2 * {"vllm": 16, "sglang": 1}[runtime]
    blocks0 = headroom(i0.arch, m0, i0.inputs, shape0).kv_blocks
    blocks1 = headroom(i1.arch, m1, i1.inputs, shape1).kv_blocks
    assert blocks0 == np.floor(m0.kv_room_bytes / block_bytes)
    assert blocks1 == np.floor((m0.kv_room_bytes - 4 * slot_bytes) / block_bytes)
    assert blocks1 < blocks0


def test_the_plan_and_the_simulation_see_the_smaller_kv_pool():
    p0, p1 = plan(BASE), plan(WITH_LORA)
    assert "lora_adapters_bytes" not in p0.memory.components
    assert p1.memory.components["lora_adapters_bytes"] == 4 * 2 * SLOT_ELEMENTS[4]
    assert p1.memory.kv_blocks < p0.memory.kv_blocks
    assert p1.memory.max_concurrency <= p0.memory.max_concurrency
    e0 = TrafficEngine.of(BASE, traffic=Traffic(num_requests=10))
    e1 = TrafficEngine.of(WITH_LORA, traffic=Traffic(num_requests=10))
    assert e1.limits.kv_blocks == p1.memory.kv_blocks < e0.limits.kv_blocks == p0.memory.kv_blocks


def test_more_slots_or_a_larger_rank_take_more_memory():
    bytes_by_slots = [
        plan(InferenceScenario(lora={"adapters": 16, "max_loras": k})).memory.components["lora_adapters_bytes"]
        for k in (1, 2, 4, 8)
    ]
    assert bytes_by_slots == [k * 2 * SLOT_ELEMENTS[4] for k in (1, 2, 4, 8)]
    by_rank = [
        plan(InferenceScenario(lora={"adapters": 4, "max_loras": 4, "adapter_rank": r})).memory.components[
            "lora_adapters_bytes"
        ]
        for r in (8, 16, 64)
    ]
    assert by_rank == [4 * 2 * SLOT_ELEMENTS[4] * r / 16 for r in (8, 16, 64)]


# ------------------------------------------------------------------------------------- TTFT and swaps


def test_ttft_adds_the_expected_adapter_load():
    """Even traffic over 10 adapters, 4 slots, the host holding 5: 60 % of requests copy their adapter over the
    host link, 50 % read it from storage first (Che, exact here)."""
    s = InferenceScenario(lora={**LORA, "max_cpu_loras": 5})
    i = scenario_inputs(s)
    m = inference_metrics(i.arch, i.counts, i.hw, i.efficiency, i.inputs, i.draft)
    slot_bytes, file_bytes = 2 * SLOT_ELEMENTS[4], 2 * LLAMA70_RANK16
    host_link = s.accelerator().host_link_bandwidth_bytes_per_second
    expected = 0.6 * slot_bytes / host_link + 0.5 * file_bytes / ADAPTER_STORAGE_BYTES_PER_SECOND
    assert m.adapter_load_seconds == pytest.approx(expected, rel=1e-9)
    assert m.ttft_seconds == pytest.approx(m.request_overhead_seconds + expected + m.prefill.seconds, rel=REL)
    assert plan(s).performance.ttft_seconds == pytest.approx(m.ttft_seconds, rel=REL)
    # every adapter resident: no load, but the prefill still runs the adapters' kernels
    resident = plan(InferenceScenario(lora={"adapters": 4, "max_loras": 4})).performance.ttft_seconds
    assert plan(BASE).performance.ttft_seconds < resident < plan(s).performance.ttft_seconds


# ------------------------------------------------------------------------------------ step composition

MODELS = [
    dict(model="llama-3.1-70b"),  # dense GQA, TP4
    dict(model="mixtral-8x7b"),  # routed experts: attention's adapters only
    dict(model="deepseek-v2-lite", num_gpus=2, tensor_parallel=2),  # MLA + MoE with shared experts
    dict(model="gpt-oss-20b", num_gpus=1, tensor_parallel=1),  # sliding window + MoE
    dict(model="llama-3.1-8b", num_gpus=2, tensor_parallel=1, pipeline_parallel=2),  # PP
]
LORAS = [
    {"adapters": 10, "max_loras": 4},
    {"adapters": 200, "max_loras": 16, "zipf_exponent": 1.1, "adapter_rank": 64, "max_cpu_loras": 50},
    {"adapters": 3, "target_modules": ["q", "v"]},
]
OPTIONS = [{}, {"runtime": "sglang"}, {"prefix_cache_hit_rate": 0.5}]


def _grid(seed: int = 26, size: int = 8):
    rng = random.Random(seed)
    triples = [(m, lo, o) for m in range(len(MODELS)) for lo in range(len(LORAS)) for o in range(len(OPTIONS))]
    drawn = rng.sample(triples, size) + [(m, 0, 0) for m in range(len(MODELS))]
    return [
        pytest.param(
            {**MODELS[m], **OPTIONS[o], "lora": LORAS[lo]},
            id=f"{MODELS[m]['model']}-lora{lo}-{'+'.join(OPTIONS[o]) or 'plain'}",
        )
        for m, lo, o in dict.fromkeys(drawn)
    ]


@pytest.mark.parametrize("fields", _grid())
def test_a_simulated_step_with_adapters_is_the_static_step(fields):
    """The simulation's tables and the static plan's step functions price the adapters alike, to 1e-9."""
    scenario = InferenceScenario.model_validate(fields)
    i, engine, shape, weights = _static(scenario)
    assert i.inputs.adapters is not None
    requests = engine.requests()
    cost = engine.step_cost(requests)
    pp = scenario.pipeline_parallel
    decode_weights = decode_read_weight_bytes(i.counts, i.inputs, weights)
    rng = random.Random(str(fields))
    for _ in range(4):
        batch, context = rng.randint(1, 64), rng.randint(1, cost.max_position_tokens)
        micro_shape = replace(shape, micro_batch=-(-batch // pp))
        x = replace(i.inputs, prompt_tokens=context, output_tokens=0)
        ctx = StepContext(i.arch, i.counts, i.hw, i.efficiency, x, micro_shape)
        step = decode_step(ctx, decode_weights)
        assert step.adapter_seconds > 0
        assert cost.mixed_seconds(batch, batch * context, []) == pytest.approx(step.seconds, rel=REL)
        assert cost.decode_step_seconds(batch, batch * context) == pytest.approx(step.seconds, rel=REL)
        assert cost.decode_seconds(batch, np.array([batch * context]))[0] == pytest.approx(step.seconds, rel=REL)
        simulated = cost.step(batch, batch * context, [])
        assert simulated.adapter_seconds == pytest.approx(step.adapter_seconds, rel=REL)
        assert sum(simulated.terms().values()) == pytest.approx(simulated.seconds, rel=REL)
    prompt = min(int(requests.prompt_tokens[0]), scenario.prefill_chunk_tokens)
    x = replace(i.inputs, prompt_tokens=prompt)
    ctx = StepContext(i.arch, i.counts, i.hw, i.efficiency, x, shape)
    for new in (prompt, max(prompt // 8, 1)):
        expected = prefill_step(ctx, decode_weights, new, 1)
        assert cost.mixed_seconds(0, 0, [(prompt - new, prompt)]) == pytest.approx(expected.seconds, rel=REL)
        assert expected.adapter_seconds > 0


def test_a_decode_step_s_adapter_work_by_hand():
    """Llama 3.1 70B, TP4, a batch of 64 over 10 even adapters with 4 slots: 64 tokens x 2 FLOPs x the slot's
    106,823,680 elements; the 4 slots' bytes read once (64 draws over 10 adapters hold ~10 distinct, clipped to
    4) plus the activations the kernels move; 80 layers x 8 launches; the kernels' time is the slower of FLOPs and
    bytes plus the launches.

    Activations per token and layer on one GPU (hidden 8192, 64 q heads and 8 KV heads of 128, MLP 28672, TP4):
    each group's input read once, each wrapped output read and written: qkv 8192 + 2 x (2048 + 256 + 256) = 13,312;
    o 2048 + 2 x 8192 = 18,432; gate_up 8192 + 2 x (7168 + 7168) = 36,864; down 7168 + 2 x 8192 = 23,552: 92,160
    elements, x 80 layers x 2 bytes = 14,745,600 bytes per token."""
    i = scenario_inputs(WITH_LORA)
    shape = ReplicaShape.of(i.arch, i.inputs, i.hw)
    weights = inference_memory(i.arch, i.counts, i.hw, i.inputs, shape).weights_bytes
    ctx = StepContext(i.arch, i.counts, i.hw, i.efficiency, i.inputs, shape)
    assert shape.micro_batch == 64
    work = decode_work(ctx, weights, 64, 2048)
    assert work.adapter_flops == 64 * 2 * SLOT_ELEMENTS[4]
    assert i.inputs.adapters.activation_bytes_per_token == 14_745_600
    assert work.adapter_bytes == pytest.approx(4 * 2 * SLOT_ELEMENTS[4] + 64 * 14_745_600, rel=REL)
    assert work.adapter_kernels == 80 * 8
    rates = ctx.rates
    expected = (
        max(work.adapter_flops / rates.decode_gemm_flops_per_second, work.adapter_bytes / rates.weight_bytes_per_second)
        + 640 * ctx.hw.gemm_tail_seconds
    )
    assert adapter_kernel_seconds(work, ctx) == pytest.approx(expected, rel=REL)
    step = decode_step(ctx, decode_read_weight_bytes(i.counts, i.inputs, weights))
    assert step.adapter_seconds == pytest.approx(adapter_kernel_seconds(decode_work(ctx, weights, 64, 2304), ctx))
    assert step.terms()["PP x LoRA kernels"] == step.adapter_seconds
    # a lone 2048-token prompt: its tokens' FLOPs, one adapter read per engine step
    prompt = prefill_step(ctx, weights, 2048, 1)
    assert prompt.adapter_seconds >= 2048 * 2 * SLOT_ELEMENTS[4] / rates.decode_gemm_flops_per_second


def _decode_seconds(**lora) -> float:
    return plan(InferenceScenario(lora=lora)).performance.decode_step_seconds


def test_adapters_slow_the_decode_step():
    assert _decode_seconds(adapters=1, max_loras=1) > plan(BASE).performance.decode_step_seconds
    assert plan(WITH_LORA).performance.tpot_seconds > plan(BASE).performance.tpot_seconds


def test_more_distinct_adapters_never_make_a_step_faster():
    by_slots = [_decode_seconds(adapters=16, max_loras=k) for k in (1, 2, 4, 8, 16)]
    assert all(b >= a for a, b in zip(by_slots, by_slots[1:])), by_slots
    assert by_slots[-1] > by_slots[0]
    by_adapters = [_decode_seconds(adapters=n, max_loras=8) for n in (1, 2, 4, 8, 16, 64)]
    assert all(b >= a for a, b in zip(by_adapters, by_adapters[1:])), by_adapters
    assert by_adapters[-1] > by_adapters[0]
    # skewed traffic brings fewer distinct adapters into a batch than even traffic
    assert _decode_seconds(adapters=64, max_loras=64, zipf_exponent=2.0) < _decode_seconds(adapters=64, max_loras=64)


def test_a_larger_rank_is_slower_and_rank_zero_is_refused():
    by_rank = [_decode_seconds(adapters=4, max_loras=4, adapter_rank=r) for r in (4, 8, 16, 64, 256)]
    assert all(b > a for a, b in zip(by_rank, by_rank[1:])), by_rank
    with pytest.raises(ValidationError) as info:
        InferenceScenario(lora={"adapters": 4, "adapter_rank": 0})
    assert "adapter_rank" in explain(info.value)


# ------------------------------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    "shares, words",
    [
        ([0.5, 0.5], "lists 2 shares for 3 adapters"),
        ([0.5, -0.1, 0.6], "non-negative"),
        ([0.0, 0.0, 0.0], "positive sum"),
        ([0.5, float("nan"), 0.5], "non-negative"),
        ([0.5, float("inf"), 0.5], "non-negative"),
    ],
)
def test_bad_traffic_shares_get_a_sentence(shares, words):
    with pytest.raises(ValidationError) as info:
        InferenceScenario(lora={"adapters": 3, "traffic_shares": shares})
    message = explain(info.value)
    assert words in message and "lora" in message
    with pytest.raises((ValidationError, PlanningError)):
        LoraAdapters(adapters=3, traffic_shares=shares)


def test_traffic_shares_are_normalised_and_a_zero_share_is_allowed():
    lora = LoraAdapters(adapters=3, traffic_shares=(2.0, 0.0, 6.0), max_loras=1)
    assert lora.shares().tolist() == [0.25, 0.0, 0.75]
    a = _adapters(BASE.architecture(), lora)
    assert a.expected_distinct(1e6) == 1  # clipped at the one slot
    unclipped = _adapters(BASE.architecture(), lora.model_copy(update={"max_loras": 3}))
    assert unclipped.expected_distinct(1e6) == pytest.approx(2.0)  # the unused adapter never comes


@pytest.mark.parametrize(
    "fields, words",
    [
        (dict(model="qwen3-next-80b-a3b", gpu="h200", num_gpus=2, tensor_parallel=2), "attention-only decoders"),
        (dict(runtime="hf-transformers"), "does not batch requests of different LoRA adapters"),
        (dict(runtime="llama.cpp"), "does not batch requests of different LoRA adapters"),
    ],
)
def test_what_multi_lora_serving_is_not_planned_for_is_refused_with_a_sentence(fields, words):
    with pytest.raises(ValidationError) as info:
        InferenceScenario(**fields, lora=LORA)
    assert words in explain(info.value)
    scenario = InferenceScenario(**fields)  # the same without adapters plans
    with pytest.raises(PlanningError, match=words):
        check_adapters_fit(scenario.architecture(), scenario.runtime)


@pytest.mark.parametrize(
    "lora, words",
    [
        ({"adapters": 0}, "adapters"),
        ({"adapters": 4, "max_loras": 0}, "max_loras"),
        ({"adapters": 4, "target_modules": []}, "at least one target module"),
        ({"adapters": 4, "target_modules": ["lm_head"]}, "target_modules"),
        ({"adapters": 4, "zipf_exponent": -1}, "zipf_exponent"),
        ({"adapters": 4, "storage_bytes_per_second": 0}, "storage_bytes_per_second"),
        ({"adapters": 4, "unknown": 1}, "unknown"),
    ],
)
def test_impossible_adapters_are_refused_with_a_sentence(lora, words):
    with pytest.raises(ValidationError) as info:
        InferenceScenario(lora=lora)
    assert words in explain(info.value)


def test_max_loras_is_capped_at_the_adapters_and_defaults_to_the_engine_s():
    capped = InferenceInputs.from_scenario(InferenceScenario(lora={"adapters": 3, "max_loras": 8})).adapters
    assert capped is not None and capped.slots == 3
    assert (
        plan(InferenceScenario(lora={"adapters": 3, "max_loras": 8})).memory.components["lora_adapters_bytes"]
        == 3 * 2 * SLOT_ELEMENTS[4]
    )
    defaults = {"vllm": 1, "sglang": 8, "tensorrt-llm": 4}
    for runtime, slots in defaults.items():
        a = InferenceInputs.from_scenario(InferenceScenario(runtime=runtime, lora={"adapters": 20})).adapters
        assert a is not None and a.slots == slots, runtime
        few = InferenceInputs.from_scenario(InferenceScenario(runtime=runtime, lora={"adapters": 2})).adapters
        assert few is not None and few.slots == min(slots, 2), runtime
    lora = LoraAdapters(adapters=6, max_cpu_loras=100)
    assert lora.host_slots() == 6
    assert LoraAdapters(adapters=6).host_slots() == 6
    assert list(LoraAdapters(target_modules=("q", "q", "v")).target_modules) == ["q", "v"]


def test_the_plan_says_how_it_priced_the_adapters():
    p = plan(WITH_LORA)
    text = " ".join(p.assumptions)
    assert "10 adapters of rank 16" in text and "4 GPU slots" in text and "60% of requests" in text
    assert not any("LoRA" in a for a in plan(BASE).assumptions)


# ------------------------------------------------------------------------------ the draft and the sweep

SPECULATIVE = {"method": "eagle", "num_speculative_tokens": 3, "acceptance_rate": 0.7}


def test_the_draft_of_a_speculative_round_runs_no_adapters():
    def draft_step(scenario: InferenceScenario):
        engine = TrafficEngine.of(scenario, traffic=Traffic(num_requests=10))
        return engine.speculative_cost(engine.requests()).draft.step(64, 64 * 2300, [])

    with_adapters = draft_step(InferenceScenario(speculative=SPECULATIVE, lora=LORA))
    without = draft_step(InferenceScenario(speculative=SPECULATIVE))
    assert with_adapters.adapter_seconds == 0
    assert with_adapters.seconds == pytest.approx(without.seconds, rel=REL)


def test_a_sweep_prices_each_row_s_adapter_slots_as_plan_does():
    from planner.search.sweep import evaluate_inference, inference_grid, scenario_for_row

    grid = inference_grid(WITH_LORA, gpus=["h100-sxm"], num_gpus=[8], tensor_parallel=[2, 4, 8], concurrency=[64])
    result = evaluate_inference(WITH_LORA, grid)
    for _, row in result[result["valid"]].iterrows():
        p = plan(scenario_for_row(WITH_LORA, row))
        assert row["total_bytes"] == p.memory.total_bytes, row["tensor_parallel"]
        assert row["tpot_seconds"] == p.performance.tpot_seconds, row["tensor_parallel"]
