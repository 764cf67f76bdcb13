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
from planner.training import elementwise_kernels as ek
from planner.training.inputs import training_hardware, training_inputs
from planner.training.metrics import training_metrics
from planner.training.scenario import TrainingScenario
from planner.training.step import training_flops

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import training_accuracy

H, Q, KV, MLP, LAYERS, VOCAB = 4096, 32 * 128, 8 * 128, 14336, 32, 128256  # Llama-3.1-8B
TOKENS = 8192  # one sequence of 8192 per micro-batch


def _llama8b(**fields) -> TrainingScenario:
    base = {
        "model": "llama-3.1-8b",
        "gpu": "h100-sxm",
        "num_gpus": 8,
        "micro_batch_size": 1,
        "global_batch_size": 8,
        "sequence_length": TOKENS,
    }
    return TrainingScenario.model_validate({**base, **fields})


def _layer_bytes(s: TrainingScenario, moe_layer: bool = False):
    return ek.layer_elementwise_bytes(s.architecture(), training_inputs(s), moe_layer, 1.0)


def _stage_bytes(s: TrainingScenario) -> float:
    arch = s.architecture()
    inputs = training_inputs(s)
    return ek.stage_elementwise_bytes(arch, inputs, training_flops(arch, parameter_counts(arch), inputs))


def test_one_llama_layer_by_hand():
    """Per token, in bf16: two RMSNorms 2 x (2 + 3) x 4096, two residual adds 2 x (3 + 3) x 4096, rotary on q and k
    (2 + 2) x (4096 + 1024), SwiGLU (3 + 5) x 14336: 225,280 elements, 450,560 B."""
    stream_f, stream_b, act_f, act_b, norm_f = _layer_bytes(_llama8b())
    assert stream_f / TOKENS == 2 * (2 * 2 * H + 2 * 3 * H + 2 * (Q + KV))
    assert stream_b / TOKENS == 2 * (2 * 3 * H + 2 * 3 * H + 2 * (Q + KV))
    assert (act_f, act_b) == (2 * 3 * MLP * TOKENS, 2 * 5 * MLP * TOKENS)
    assert norm_f == 2 * 2 * 2 * H * TOKENS
    assert (stream_f + stream_b + act_f + act_b) / TOKENS == 450_560


def test_tensor_and_sequence_parallel_split():
    """TP4 column-splits q, k and the MLP; the norms and residual adds see every token on each rank unless sequence
    parallelism splits the tokens too."""
    tp1 = _layer_bytes(_llama8b())
    tp4 = _layer_bytes(_llama8b(tensor_parallel=4, sequence_parallel=False))
    sp4 = _layer_bytes(_llama8b(tensor_parallel=4, sequence_parallel=True))
    rope_f = 2 * 2 * (Q + KV) * TOKENS
    assert tp4[0] == pytest.approx(tp1[0] - rope_f * 3 / 4)
    assert tp4[2:4] == pytest.approx((tp1[2] / 4, tp1[3] / 4))
    assert sp4[0] == pytest.approx((tp1[0] - rope_f) / 4 + rope_f / 4)
    assert sp4[4] == pytest.approx(tp1[4] / 4)


def test_recomputation_repeats_forwards():
    """Full and torchtitan's op-level recomputation run every forward kernel again; Megatron's selective layernorm
    only the norms; core_attn none of these."""
    none = _stage_bytes(_llama8b())
    stream_f, _, act_f, _, norm_f = _layer_bytes(_llama8b())
    assert _stage_bytes(_llama8b(activation_checkpointing="full")) == pytest.approx(none + LAYERS * (stream_f + act_f))
    assert _stage_bytes(_llama8b(activation_checkpointing="op")) == pytest.approx(none + LAYERS * (stream_f + act_f))
    layernorm = _llama8b(activation_checkpointing="selective", recompute_modules="core_attn,layernorm")
    assert _stage_bytes(layernorm) == pytest.approx(none + LAYERS * norm_f)
    assert _stage_bytes(_llama8b(activation_checkpointing="selective")) == pytest.approx(none)


def test_the_loss_reads_logits_and_writes_their_gradient():
    """Over the vocabulary per token: the 16-bit logits read and their gradient written (2 x 2 B), plus the loss's
    own copies written and read once: Transformer Engine's one 16-bit copy, the unfused loss's three fp32 ones."""
    layers = _stage_bytes(_llama8b(loss_kernel="te")) - TOKENS * VOCAB * 2 * (2 + 2)
    assert _stage_bytes(_llama8b(loss_kernel="unfused")) == pytest.approx(layers + TOKENS * VOCAB * 2 * (2 + 12))


def test_moe_layer_routes_k_rows_through_the_expert_activation():
    """Qwen3-30B-A3B (hidden 2048, 32 q and 4 KV heads of 128, 128 experts of 768, top 8, no shared expert): the
    stream terms as a dense layer's; the SwiGLU over tokens x 8 rows of 768, scaled by the busiest rank's load."""
    s = TrainingScenario.model_validate(
        {**_llama8b().model_dump(), "model": "qwen3-30b-a3b", "expert_parallel": 8, "data_parallel": 8}
    )
    arch, inputs = s.architecture(), training_inputs(s)
    balanced = ek.layer_elementwise_bytes(arch, inputs, True, 1.0)
    skewed = ek.layer_elementwise_bytes(arch, inputs, True, 1.5)
    assert balanced[2:4] == (2 * 3 * 768 * 8 * TOKENS, 2 * 5 * 768 * 8 * TOKENS)
    assert balanced[0] / TOKENS == 2 * (2 * 2 * 2048 + 2 * 3 * 2048 + 2 * (32 + 4) * 128)
    assert skewed[2] == pytest.approx(1.5 * balanced[2]) and skewed[0] == balanced[0]


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
