"""Training memory terms on toy dimensions; expected values are written out as arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

from planner.model.architecture import ModelArchitecture, parameter_counts
from planner.physics.lora import lora_adapter_elements
from planner.physics.projections import layer_matrices
from planner.training import activations as tact
from planner.training import memory as tmem
from planner.training import precision as tprec
from planner.training.recompute import Recompute

TOY = ModelArchitecture(
    name="toy",
    model_type="llama",
    num_layers=4,
    hidden_size=8,
    num_attention_heads=2,
    num_kv_heads=1,
    head_dim=4,
    intermediate_size=16,
    vocab_size=32,
    max_context_tokens=64,
)
TOY_MOE = ModelArchitecture(
    name="toy-moe",
    model_type="mixtral",
    num_layers=4,
    hidden_size=8,
    num_attention_heads=2,
    num_kv_heads=1,
    head_dim=4,
    intermediate_size=12,
    vocab_size=32,
    max_context_tokens=64,
    num_experts=4,
    experts_per_token=2,
    expert_intermediate_size=12,
)


def test_precision_recipes():
    p = tprec.PRECISIONS
    # ZeRO's mixed-precision Adam: 2 + 2 + K with K = 4 (master) + 4 + 4 = 12 -> 16 bytes per parameter
    assert p["mixed_bf16"].param + p["mixed_bf16"].grad + p["mixed_bf16"].master + 2 * p["mixed_bf16"].state == 16
    assert p["amp_bf16"].param + p["amp_bf16"].grad + 2 * p["amp_bf16"].state == 16  # fp32 params double as master
    assert p["bf16"].param + p["bf16"].grad + 2 * p["bf16"].state == 8
    assert p["fp32"].activation == 4 and p["mixed_fp16"].compute_dtype == "fp16"


def test_optimizer_state_bytes_per_element():
    assert tprec.optimizer_state_bytes_per_element("adamw", 4) == 8
    assert tprec.optimizer_state_bytes_per_element("adam8bit", 4) == 2 * (1 + 4 / 256)  # uint8 + fp32 absmax / 256
    assert tprec.optimizer_state_bytes_per_element("sgd_momentum", 4) == 4
    assert tprec.optimizer_state_bytes_per_element("sgd", 4) == 0
    assert tprec.optimizer_state_bytes_per_element("adafactor", 4) is None


def test_nf4_storage_matches_qlora_paper():
    # 4 bits + block scales: fp32 per 64 weights (0.5 bit/param) or, double-quantized, 8-bit per 64 plus fp32 per
    # 64 x 256 (8/64 + 32/16384 = 0.127 bit/param, QLoRA Sec. 3)
    assert tprec.nf4_bytes_per_element(False) == 0.5 + 4 / 64
    assert (tprec.nf4_bytes_per_element(True) - 0.5) * 8 == pytest.approx(0.127, abs=5e-4)


def test_zero_sharding_of_model_states():
    psi = 1000.0
    # weights: 2 psi until ZeRO-3 splits them over the 4-GPU group; gradients from ZeRO-2; optimizer from ZeRO-1
    assert [tmem.weights_bytes(2 * psi, 0, z, 4, 4) for z in range(4)] == [2000, 2000, 2000, 500]
    assert [tmem.gradients_bytes(2 * psi, 0, z, 4, 4) for z in range(4)] == [2000, 2000, 500, 500]
    assert [tmem.optimizer_states_bytes(12 * psi, 0, z, 4, 4) for z in range(4)] == [12000, 3000, 3000, 3000]
    # routed experts shard over the expert-data-parallel group (DP / EP): here 4 / 2
    assert tmem.optimizer_states_bytes(0, 12 * psi, 1, 4, 2) == 6000
    # offload moves them to the host
    assert tmem.optimizer_states_bytes(12 * psi, 0, 1, 4, 4, offload_optimizer=True) == 0
    assert tmem.weights_bytes(2 * psi, 0, 3, 4, 4, offload_parameters=True) == 0
    # an fp32 accumulation buffer next to 16-bit gradients, sharded like them; nothing when grads are fp32
    assert tmem.gradient_accumulation_bytes(psi, 0, 2, 4, 4, True, 2) == 4 * psi / 4
    assert tmem.gradient_accumulation_bytes(psi, 0, 2, 4, 4, True, 4) == 0
    assert tmem.gradient_accumulation_bytes(psi, 0, 0, 4, 4, False, 2) == 0


def test_sharding_buffers():
    # ZeRO-3: gathered unit (100 B) + prefetched layer (60 B) + unsharded gradient unit (50 B); ZeRO-2: the gradients
    assert tmem.sharding_buffer_bytes(3, 8, 100, 60, 50) == 210
    assert tmem.sharding_buffer_bytes(2, 8, 100, 60, 50) == 50
    assert tmem.sharding_buffer_bytes(1, 8, 100, 60, 50) == 0
    assert tmem.sharding_buffer_bytes(3, 1, 100, 60, 50) == 0  # a group of one gathers nothing


def test_layer_matrices_cover_the_layer_parameters():
    # relu^2 experts (Nemotron-H): up and down only, routed and shared alike
    ungated = TOY_MOE.model_copy(
        update={"name": "toy-moe-relu2", "experts_gated": False, "shared_expert_intermediate_size": 6}
    )
    for arch in (TOY, TOY_MOE, ungated):
        counts = parameter_counts(arch)
        for moe in (False, True) if arch.is_moe else (False,):
            layer = counts.moe_layer if moe else counts.dense_layer
            matrices = sum(m.count * m.d_in * m.d_out for m in layer_matrices(arch, moe))
            assert matrices == layer.linear + layer.router


def test_lora_adapter_elements():
    # rank 2 on q (8 -> 8) and v (8 -> 4): 2 x (8 + 8) + 2 x (8 + 4) = 56 per layer, 4 layers
    assert lora_adapter_elements(TOY, 2, ("q", "v"), 1, 1, 1) == 4 * 56
    # TP 2 splits B of column-parallel q (8 -> 4 rows) and v (KV replicated once TP > KV heads: stays 4): 2 x (8 + 4)
    # + 2 x (8 + 4); pipeline 2 keeps 2 layers
    assert lora_adapter_elements(TOY, 2, ("q", "v"), 2, 2, 1) == 2 * (24 + 24)
    # row-parallel o (8 -> 8) splits A: 2 x (8/2 + 8) = 24 per layer
    assert lora_adapter_elements(TOY, 2, ("o",), 2, 1, 1) == 4 * 24
    # MoE: MLP targets apply to every expert; experts="only" counts just those (4 experts x 3 x 2 x (8 + 12))
    experts = 4 * 3 * 2 * (8 + 12)
    assert lora_adapter_elements(TOY_MOE, 2, ("gate", "up", "down"), 1, 1, 1, experts="only") == 4 * experts
    assert lora_adapter_elements(TOY_MOE, 2, ("gate", "up", "down"), 1, 1, 2, experts="only") == 4 * experts / 2


def test_edge_parameters_by_stage():
    counts = parameter_counts(TOY)  # untied: embedding 32 x 8 = 256, head 256, final norm 8
    assert tmem.edge_parameter_elements(counts, 1, 1, True) == 256 + 256 + 8
    assert tmem.edge_parameter_elements(counts, 2, 2, True) == 128
    assert tmem.edge_parameter_elements(counts, 2, 2, False) == 128 + 8
    tied = parameter_counts(TOY.model_copy(update={"tie_word_embeddings": True}))
    assert tmem.edge_parameter_elements(tied, 1, 1, True) == 256 + 8  # one matrix when on one stage
    assert tmem.edge_parameter_elements(tied, 1, 2, False) == 256 + 8  # the last stage keeps its own copy


def test_layer_activation_bytes_toy():
    """h 8, 2 heads x 4, 1 KV head, SwiGLU 16, bf16, s = 10:
    residual: 2 norms x (8 x 2 + 4) + 2 x 8 x 2 = 72; attention: (8 + 2 x 4 + 8) x 2 + 2 heads x 4 (lse) = 56;
    MLP: 4 x 16 x 2 = 128."""

    def f(arch, moe_layer, tp, sp, flash, recompute, dropout, seq):
        activations = tact.ActivationInputs(tp, sp, flash, dropout, seq, recompute=Recompute(recompute))
        return tact.layer_activation_bytes_per_token(arch, moe_layer, activations)

    assert f(TOY, False, 1, False, True, 0, False, 10) == 72 + 56 + 128
    # unfused attention: K and V expanded to the 2 query heads, softmax kept: 2 heads x 10 keys x 2 B
    assert f(TOY, False, 1, False, False, 0, False, 10) == 72 + (8 + 8 + 8 + 8) * 2 + 128 + 2 * 10 * 2
    assert f(TOY, False, 1, False, False, 1, False, 10) == 72 + (8 + 8 + 8 + 8) * 2 + 128  # selective drops it
    assert f(TOY, False, 1, False, True, 2, False, 10) == 8 * 2  # full: the layer input only
    # TP 2 without SP: residual replicated; q/out halve, the single KV head is replicated, lse halves
    assert f(TOY, False, 2, False, True, 0, False, 10) == 72 + (4 + 2 * 4 + 4) * 2 + 4 + 128 / 2
    assert f(TOY, False, 2, True, True, 0, False, 10) == 72 / 2 + (4 + 2 * 4 + 4) * 2 + 4 + 128 / 2
    # working set of recomputation = everything minus what is kept
    assert (
        tact.layer_activation_terms(TOY, False, tact.ActivationInputs(1, False, True, False, 10)).rebuilt(
            Recompute.FULL
        )
        == 256 - 16
    )


def test_moe_layer_activation_bytes_toy():
    """4 experts, top-2, expert width 12: fp32 router probabilities 4 x 4 = 16, per routed copy the dispatched input
    and weighted output (2 x 8 x 2 = 32) and the SwiGLU tensors (4 x 12 x 2 = 96)."""
    dense_part = 72 + 56
    assert tact.layer_activation_bytes_per_token(TOY_MOE, True, tact.ActivationInputs(1, False, True, False, 10)) == (
        dense_part + 16 + 2 * (32 + 96)
    )


def test_in_flight_microbatches():
    assert tact.in_flight_microbatches(1, 8) == 1
    assert tact.in_flight_microbatches(4, 8) == 4  # 1F1B warm-up
    assert tact.in_flight_microbatches(4, 2) == 2  # fewer micro-batches than stages
    assert tact.in_flight_microbatches(4, 8, 2) == 4 + 3 / 2  # interleaved


def test_stage_activations_and_logits():
    s, b = 10, 3
    per_layer = 72 + 56 + 128
    output_edge = 8 * 2 + 4 + 8 * 2  # final norm input + stats + head input
    activations = tact.ActivationInputs(1, False, True, False, s)
    single = tact.stage_activation_bytes(TOY, activations, tact.StageSchedule(1, 4), b * s)
    assert single == b * s * (4 * per_layer + output_edge)
    # PP 2: first stage holds 2 micro-batches of its 2 layers, no output edge
    first = tact.stage_activation_bytes(TOY, activations, tact.StageSchedule(2, 4), b * s)
    assert first == b * s * 2 * 2 * per_layer
    last = tact.stage_activation_bytes(TOY, activations, tact.StageSchedule(2, 4, first_stage=False), b * s)
    assert last == b * s * (2 * per_layer + output_edge)
    # context parallelism splits the tokens: CP 2 holds half of each sequence
    assert tact.stage_activation_bytes(TOY, activations, tact.StageSchedule(1, 4), b * s / 2) == single / 2
    # logits: 12 B x vocabulary / TP per token, last stage only
    assert tact.logits_bytes(TOY, 2, b * s, True) == b * s * 12 * 32 / 2
    assert tact.logits_bytes(TOY, 2, b * s, False) == 0


def test_adafactor_factored_state_toy():
    counts = parameter_counts(TOY)
    # per layer: q 8+8, k 8+4, v 8+4, o 8+8, gate 8+16, up 8+16, down 16+8, norms 2 x 8 = 144;
    # edges: embedding 32 + 8, head 32 + 8, final norm 8 = 88
    assert tmem.adafactor_state_elements(counts, TOY, 1, 1, 1, True) == 4 * 144 + 88


def test_terms_broadcast_over_arrays():
    tp = np.array([1, 2])
    arr = tact.layer_activation_bytes_per_token(TOY, False, tact.ActivationInputs(tp, True, True, False, 10))
    assert list(arr) == [
        tact.layer_activation_bytes_per_token(TOY, False, tact.ActivationInputs(t, True, True, False, 10))
        for t in (1, 2)
    ]
    micro = np.array([1, 2, 4])
    activations = tact.ActivationInputs(1, False, True, False, 10)
    arr = tact.stage_activation_bytes(TOY, activations, tact.StageSchedule(2, 8 / micro), micro * 10)
    scalars = [tact.stage_activation_bytes(TOY, activations, tact.StageSchedule(2, 8 / m), int(m) * 10) for m in micro]
    assert list(arr) == scalars


def test_logits_bytes_by_loss_kernel():
    """Toy vocabulary 32, TP 2, 10 tokens on the last stage. unfused: 3 fp32 tensors per logit (12 B): 12 x 16 x 10;
    Transformer Engine's parallel_cross_entropy keeps the bf16 logits and writes their gradient in place: 2 x 16 x 10;
    no other stage holds them."""
    assert tact.loss_bytes_per_logit("unfused", 2.0) == 12.0
    assert tact.loss_bytes_per_logit("te", 2.0) == 2.0
    assert tact.logits_bytes(TOY, 2, 10, True) == 12 * 16 * 10
    assert tact.logits_bytes(TOY, 2, 10, True, tact.loss_bytes_per_logit("te", 2.0)) == 2 * 16 * 10
    assert tact.logits_bytes(TOY, 2, 10, False, 2.0) == 0
