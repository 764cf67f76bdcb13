"""Training's memory-bound elementwise kernels (planner/training/elementwise_kernels.py): one Llama layer's and one
MoE layer's bytes counted by hand, how tensor and sequence parallelism split them, what each recomputation level
repeats, the loss kernels, their seconds in the step, and the reference share the training efficiency is re-stated
with (planner/physics/efficiency.py REFERENCE_ELEMENTWISE_SHARE), recomputed here from Narayanan et al.'s
configurations."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

from planner import plan
from planner.model.architecture import parameter_counts
from planner.physics import efficiency as eff
from planner.physics import elementwise as pe
from planner.training import elementwise_kernels as ek
from planner.training.inputs import training_hardware, training_inputs
from planner.training.metrics import training_metrics
from planner.training.scenario import TrainingScenario
from planner.training.step import training_flops
from tests.training.scenarios import llama8b_h100

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import training_accuracy

H, Q, KV, MLP, LAYERS, VOCAB = 4096, 32 * 128, 8 * 128, 14336, 32, 128256  # Llama-3.1-8B
TOKENS = 8192  # one sequence of 8192 per micro-batch


def _llama8b(**fields) -> TrainingScenario:
    return llama8b_h100(**fields)


def _shape(s: TrainingScenario, load_imbalance: float = 1.0) -> pe.TokenShape:
    return ek.token_shape(training_inputs(s), load_imbalance)


def _mean(s: TrainingScenario, moe_layer: bool = False, load_imbalance: float = 1.0) -> pe.LayerBytes:
    return pe.mean_layer_bytes(s.architecture(), _shape(s, load_imbalance), moe_layer)


def _stage_bytes(s: TrainingScenario) -> float:
    arch = s.architecture()
    inputs = training_inputs(s)
    return ek.stage_elementwise_bytes(arch, inputs, training_flops(arch, parameter_counts(arch), inputs))


def test_one_llama_layer_by_hand():
    """Per token, in bf16: two RMSNorms 2 x (2 + 3) x 4096, two residual adds 2 x (3 + 3) x 4096, rotary on q and k
    (2 + 2) x (4096 + 1024), SwiGLU (3 + 5) x 14336: 225,280 elements, 450,560 B."""
    b = _mean(_llama8b())
    assert b.stream[0] / TOKENS == 2 * (2 * 2 * H + 2 * 3 * H + 2 * (Q + KV))
    assert b.stream[1] / TOKENS == 2 * (2 * 3 * H + 2 * 3 * H + 2 * (Q + KV))
    assert b.dense_activation == (2 * 3 * MLP * TOKENS, 2 * 5 * MLP * TOKENS)
    assert b.pre_norms[0] == 2 * 2 * 2 * H * TOKENS
    assert b.routed_activation == b.shared_activation == (0.0, 0.0)
    assert (sum(b.stream) + sum(b.dense_activation)) / TOKENS == 450_560


def test_tensor_and_sequence_parallel_split():
    """TP4 column-splits q, k and the MLP; the norms and residual adds see every token on each rank unless sequence
    parallelism splits the tokens too."""
    tp1 = _mean(_llama8b())
    tp4 = _mean(_llama8b(tensor_parallel=4, sequence_parallel=False))
    sp4 = _mean(_llama8b(tensor_parallel=4, sequence_parallel=True))
    rope_f = 2 * 2 * (Q + KV) * TOKENS
    assert tp4.stream[0] == pytest.approx(tp1.stream[0] - rope_f * 3 / 4)
    assert tp4.dense_activation == pytest.approx((tp1.dense_activation[0] / 4, tp1.dense_activation[1] / 4))
    assert sp4.stream[0] == pytest.approx((tp1.stream[0] - rope_f) / 4 + rope_f / 4)
    assert sp4.pre_norms[0] == pytest.approx(tp1.pre_norms[0] / 4)


def test_recomputation_repeats_forwards():
    """Full and torchtitan's op-level recomputation run every forward kernel again; Megatron's selective layernorm
    only the pre-norms; core_attn none of these."""
    none = _stage_bytes(_llama8b())
    b = _mean(_llama8b())
    forward = b.stream[0] + b.dense_activation[0]
    assert _stage_bytes(_llama8b(activation_checkpointing="full")) == pytest.approx(none + LAYERS * forward)
    assert _stage_bytes(_llama8b(activation_checkpointing="op")) == pytest.approx(none + LAYERS * forward)
    layernorm = _llama8b(activation_checkpointing="selective", recompute_modules="core_attn,layernorm")
    assert _stage_bytes(layernorm) == pytest.approx(none + LAYERS * b.pre_norms[0])
    mlp = _llama8b(activation_checkpointing="selective", recompute_modules="core_attn,mlp")
    assert _stage_bytes(mlp) == pytest.approx(none + LAYERS * b.dense_activation[0])
    assert _stage_bytes(_llama8b(activation_checkpointing="selective")) == pytest.approx(none)


def test_the_loss_reads_logits_and_writes_their_gradient():
    """Over the vocabulary per token: the 16-bit logits read and their gradient written (2 x 2 B), plus the loss's
    own copies written and read once: Transformer Engine's one 16-bit copy, the unfused loss's three fp32 ones."""
    layers = _stage_bytes(_llama8b(loss_kernel="te")) - TOKENS * VOCAB * 2 * (2 + 2)
    assert _stage_bytes(_llama8b(loss_kernel="unfused")) == pytest.approx(layers + TOKENS * VOCAB * 2 * (2 + 12))


def _qwen30b(**fields) -> TrainingScenario:
    return TrainingScenario.model_validate(
        {**_llama8b().model_dump(), "model": "qwen3-30b-a3b", "expert_parallel": 8, "data_parallel": 8, **fields}
    )


def test_moe_layer_routes_k_rows_through_the_expert_activation():
    """Qwen3-30B-A3B (hidden 2048, 32 q and 4 KV heads of 128, 128 experts of 768, top 8, no shared expert): the
    stream terms as a dense layer's; the SwiGLU over tokens x 8 rows of 768, scaled by the busiest rank's load;
    moe_act recomputes the routed activation, op-level checkpointing keeps the experts' outputs."""
    balanced, skewed = _mean(_qwen30b(), True), _mean(_qwen30b(), True, 1.5)
    assert balanced.routed_activation == (2 * 3 * 768 * 8 * TOKENS, 2 * 5 * 768 * 8 * TOKENS)
    assert balanced.stream[0] / TOKENS == 2 * (2 * 2 * 2048 + 2 * 3 * 2048 + 2 * (32 + 4) * 128)
    assert balanced.dense_activation == balanced.shared_activation == (0.0, 0.0)
    assert skewed.routed_activation[0] == pytest.approx(1.5 * balanced.routed_activation[0])
    assert skewed.stream == balanced.stream
    none = _stage_bytes(_qwen30b())
    act = _qwen30b(activation_checkpointing="selective", recompute_modules="moe_act")
    assert _stage_bytes(act) == pytest.approx(none + 48 * balanced.routed_activation[0])
    op = _qwen30b(activation_checkpointing="op")
    assert _stage_bytes(op) == pytest.approx(none + 48 * balanced.stream[0])


def test_hybrid_blocks_count_only_what_they_have():
    """Nemotron-H 56B (118 blocks: 54 Mamba, 10 attention, 54 squared-ReLU MLP of 32768; hidden 8192): each block
    one pre-norm and one residual add, rotary only in the attention blocks, the activation only in the MLP ones."""
    ref = training_accuracy.model_reference("hf_config:nemotron-h-56b-base-8k.json")
    s = TrainingScenario(
        model=ref, gpu="b200", num_gpus=8, micro_batch_size=1, global_batch_size=8, sequence_length=TOKENS
    )
    arch = s.architecture()
    qk = (arch.num_attention_heads + arch.num_kv_heads) * arch.head_dim
    per_token = 118 * (2 + 3 + 3 + 3) * 8192 + 10 * (2 + 2) * qk + 54 * (2 + 3) * 32768
    assert pe.forward_backward_bytes(arch, _shape(s)) == pytest.approx(2 * per_token * TOKENS)
    mean = _mean(s)
    assert sum(mean.dense_activation) == pytest.approx(2 * 54 / 118 * 5 * 32768 * TOKENS)


def test_seconds_at_the_memory_roofline_inside_the_step():
    """The kernels' seconds are their bytes at 0.80 of HBM, and the step's compute contains them."""
    s = _llama8b()
    arch, inputs = s.architecture(), training_inputs(s)
    hw = training_hardware(s, s.accelerator())
    flops = training_flops(arch, parameter_counts(arch), inputs)
    seconds = ek.elementwise_seconds(arch, hw, eff.DEFAULT_EFFICIENCY, inputs, flops)
    assert seconds == pytest.approx(_stage_bytes(s) / (hw.bandwidth_bytes_per_second * 0.80))
    # 8B (unfused loss, no recomputation): 6.5 % of the micro-batch's compute on H100, 3.8 % on A100, whose dense
    # peak per byte of HBM is half H100's
    share = seconds / plan(s).performance.forward_backward.compute_seconds
    a100 = _llama8b(gpu="a100-80gb")
    a100_inputs, a100_hw = training_inputs(a100), training_hardware(a100, a100.accelerator())
    a100_seconds = ek.elementwise_seconds(arch, a100_hw, eff.DEFAULT_EFFICIENCY, a100_inputs, flops)
    a100_share = a100_seconds / plan(a100).performance.forward_backward.compute_seconds
    assert (a100_share, share) == pytest.approx((0.0377, 0.0652), abs=1e-3)


def _narayanan_share(row: dict) -> float:
    """Elementwise seconds over the rest of the micro-batch's compute at the end-to-end efficiency, for one
    Narayanan Table 1 configuration; the micro-batch size, which the table does not give, changes neither (both
    scale with its tokens but for the GEMMs' fixed time)."""
    row = {**row, "micro_batch": row["micro_batch"] or "1", "virtual_stages": row["virtual_stages"] or "1"}
    s = TrainingScenario.model_validate(training_accuracy.scenario_fields(row))
    arch, inputs = s.architecture(), training_inputs(s)
    hw = training_hardware(s, s.accelerator())
    end_to_end = eff.Efficiency(training_compute=eff.TRAINING_EFFICIENCY_END_TO_END)
    time = training_metrics(arch, parameter_counts(arch), hw, end_to_end, inputs).time
    seconds = ek.elementwise_seconds(arch, hw, end_to_end, inputs, time.flops)
    return seconds / (time.microbatch.compute_seconds - seconds)


def test_reference_share_recomputed_from_narayanan_table_1():
    """The training efficiency is re-stated with the elementwise share of the runs it comes from: the median over
    Narayanan et al. 2021 Table 1's ten GPT configurations (no measured figure enters it)."""
    rows = [r for r in training_accuracy.read_rows() if r["id"].startswith("narayanan21-t1-")]
    assert len(rows) == 10
    shares = [_narayanan_share(r) for r in rows]
    assert statistics.median(shares) == pytest.approx(eff.REFERENCE_ELEMENTWISE_SHARE, abs=5e-4)
    assert eff.Efficiency().training_compute == pytest.approx(0.55 / (1 - eff.REFERENCE_ELEMENTWISE_SHARE))
