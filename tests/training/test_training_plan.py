"""plan() for training: the JSON contract, consistency of the parts, calibration, examples, warnings."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from planner import parse_scenario, plan
from planner.calibration_record import CalibrationRecord
from planner.model.architecture import parameter_counts
from planner.physics.efficiency import Efficiency
from planner.training.inputs import training_hardware, training_inputs
from planner.training.metrics import training_metrics
from planner.training.scenario import TrainingScenario
from tests.calibration.synthetic import synthetic_record

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("training-*.json"))


def calibration(efficiency: Efficiency, correction: float = 0.0, label: str = "test rig") -> CalibrationRecord:
    """A real (synthetic) record measured on the default scenario's h100-sxm, with the given efficiency."""
    record = synthetic_record(label=label, correction=correction)
    return CalibrationRecord.from_json_data({**record.model_dump(mode="json"), "efficiency": efficiency.model_dump()})


def test_contract_keys_of_the_plan_json():
    data = json.loads(plan(parse_scenario({"kind": "training"})).model_dump_json())
    assert data["kind"] == "training"
    for key in ("weights_bytes", "gradients_bytes", "optimizer_states_bytes", "activations_bytes"):
        assert key in data["memory"]["components"]
    for key in (
        "total_bytes",
        "capacity_bytes",
        "fits",
        "headroom_bytes",
        "dominant_component",
        "max_micro_batch_size",
    ):
        assert key in data["memory"]
    for key in ("step_seconds", "tokens_per_second", "mfu", "hfu", "time_to_train_seconds"):
        assert key in data["performance"]
    assert "usd_total" in data["cost"]
    assert data["bottleneck"] in ("capacity", "memory_bandwidth", "compute", "communication")
    assert isinstance(data["warnings"], list) and data["assumptions"] and data["equations"]
    assert data["scenario"]["kind"] == "training"


def test_default_plan_is_sensible():
    p = plan(TrainingScenario())
    assert p.memory.fits and 0.05 < p.memory.headroom_fraction < 0.5
    assert p.memory.capacity_bytes == p.memory.budget_bytes  # training may use the whole device
    assert 0.3 < p.performance.mfu < 0.6
    c = p.memory.components
    # Llama-3.1-8B: embedding and untied head 2 x 128256 x 4096 = 1,050,673,152; per layer q, o 2 x 4096^2 +
    # k, v 2 x 4096 x 1024 + MLP 3 x 4096 x 14336 + 2 norms x 4096 = 218,112,000, x 32 = 6,979,584,000; final norm
    # 4096: 8,030,261,248 parameters. bf16 weights on every GPU; ZeRO-1 splits the 12 B/parameter of fp32 master +
    # Adam moments over the 8 data-parallel GPUs.
    assert c["weights_bytes"] == 2 * 8_030_261_248
    assert c["optimizer_states_bytes"] == 12 * 8_030_261_248 / 8
    assert p.cost.usd_total == pytest.approx(p.cost.gpu_hours * 3.0)
    assert p.performance.tokens_per_second * p.performance.time_to_train_seconds == pytest.approx(1e9)


def test_memory_components_by_hand_for_llama_8b_with_full_recomputation():
    """Llama-3.1-8B (h 4096, 32 heads x 128, 8 KV heads, SwiGLU 14336, 32 layers, vocabulary 128256), bf16,
    FlashAttention, full recomputation, one GPU's stage = the whole model, micro-batch 2 x 4096 = 8192 tokens.
    Per token:
    * stored: each layer's input only, h x 2 B = 8192 B, x 32 layers = 262,144 B;
    * one layer rebuilt while its backward runs (everything it would keep, minus the stored input):
      norms 2 x (8192 + 4 fp32 statistics) + normalized inputs of attention and MLP 2 x 8192 = 32,776;
      attention q + k + v + output (4096 + 1024 + 1024 + 4096) x 2 = 20,480, log-sum-exp 32 heads x 4 = 128;
      SwiGLU 4 x 14336 x 2 = 114,688; together 168,072 - 8192 = 159,880 B;
    * the output edge: final norm input + statistics + head input 8192 + 4 + 8192 = 16,388 B.
    262,144 + 159,880 + 16,388 = 438,412 B x 8192 tokens = 3,591,471,104 B.
    Logits: 12 B (fp32 log-probabilities, their gradient, the logits' gradient) x 128256 x 8192 tokens."""
    s = TrainingScenario(activation_checkpointing="full", micro_batch_size=2, global_batch_size=64)
    c = plan(s).memory.components
    assert c["activations_bytes"] == 3_591_471_104
    assert c["logits_bytes"] == 12 * 128_256 * 8192 == 12_608_077_824
    assert c["runtime_overhead_bytes"] == 1 << 30  # CUDA context 0.5 GiB + graph pools 0.25 + NCCL 0.25


def test_pipeline_picks_the_heavier_stage():
    p = plan(
        TrainingScenario(
            model="llama-3.1-70b",
            num_gpus=16,
            tensor_parallel=8,
            pipeline_parallel=2,
            global_batch_size=32,
            sequence_length=8192,
        )
    )
    assert p.layout.heaviest_stage == "first"  # two micro-batches in flight outweigh the head and logits
    p = plan(
        TrainingScenario(
            model="llama-3.1-70b",
            num_gpus=16,
            tensor_parallel=8,
            pipeline_parallel=2,
            global_batch_size=32,
            sequence_length=1024,
            activation_checkpointing="full",
        )
    )
    assert p.layout.heaviest_stage == "last"


def test_calibration_replaces_efficiency_and_overhead():
    s = TrainingScenario()
    base = plan(s)
    calibrated = plan(s, calibration(Efficiency(training_compute=0.275), correction=2 * 2**30))
    assert calibrated.calibration == "test rig"
    assert calibrated.memory.total_bytes - base.memory.total_bytes == 2 * 2**30
    assert calibrated.performance.step_seconds > 1.9 * base.performance.step_seconds
    assert any("test rig" in a for a in calibrated.assumptions)


def test_zero_and_offload_move_memory():
    s = dict(model="llama-3.1-8b", num_gpus=8, activation_checkpointing="full")
    z3 = plan(TrainingScenario(**s, zero_stage=3))
    off = plan(TrainingScenario(**s, zero_stage=3, offload_optimizer=True, offload_parameters=True))
    assert off.memory.components["optimizer_states_bytes"] == 0 and off.memory.components["weights_bytes"] == 0
    assert off.memory.host_bytes == pytest.approx(
        z3.memory.components["optimizer_states_bytes"] + z3.memory.components["weights_bytes"]
    )
    assert off.performance.step_breakdown_seconds["offload_transfer_seconds"] > 0
    assert z3.memory.components["sharding_buffers_bytes"] > 0


def test_lora_and_qlora_shrink_model_states():
    full = plan(
        TrainingScenario(
            model="llama-3.1-70b", num_gpus=8, zero_stage=3, global_batch_size=8, activation_checkpointing="full"
        )
    )
    qlora = plan(
        TrainingScenario(
            model="llama-3.1-70b",
            num_gpus=1,
            zero_stage=0,
            global_batch_size=8,
            activation_checkpointing="full",
            lora={"rank": 16, "quantize_base": True},
        )
    )
    assert qlora.memory.fits
    assert qlora.layout.parameters_trainable < 0.02 * full.layout.parameters_trainable
    # NF4 base ~ 0.52 B per linear weight: the 70B weights take ~37 GB instead of 141 GB
    assert 30e9 < qlora.memory.components["weights_bytes"] < 45e9
    assert qlora.performance.mfu < qlora.performance.hfu  # recomputation counted in HFU only


def test_fp32_gradient_accumulation_buffer():
    s = dict(num_gpus=8, zero_stage=2)
    off = plan(TrainingScenario(**s)).memory.components
    on = plan(TrainingScenario(**s, grad_accumulation_fp32=True)).memory.components
    assert on["gradient_accumulation_bytes"] == pytest.approx(2 * off["gradients_bytes"])


def test_metrics_broadcast_over_scenario_arrays():
    """DESIGN rule 4: the same code over numpy arrays gives the same numbers as scalar scenarios."""
    layouts = [(1, 8), (2, 4), (4, 2)]
    scenarios = [TrainingScenario(tensor_parallel=t, data_parallel=d, global_batch_size=64) for t, d in layouts]
    s0 = scenarios[0]
    arch = s0.architecture()
    counts = parameter_counts(arch)
    hw = training_hardware(s0, s0.accelerator())
    inputs = training_inputs(s0)
    layout = replace(
        inputs.layout,
        tensor_parallel=np.array([t for t, _ in layouts]),
        data_parallel=np.array([d for _, d in layouts]),
        sequence_parallel=np.array([t > 1 for t, _ in layouts]),
    )
    arrays = training_metrics(arch, counts, hw, Efficiency(), replace(inputs, layout=layout))
    for i, s in enumerate(scenarios):
        p = plan(s)
        assert float(arrays.step_seconds[i]) == pytest.approx(p.performance.step_seconds)
        assert float(arrays.memory.total_bytes[i]) == pytest.approx(p.memory.total_bytes)


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_examples_plan_and_fit(path):
    p = plan(parse_scenario(json.loads(path.read_text())))
    assert p.memory.fits
    assert np.isfinite(p.performance.step_seconds) and p.cost.usd_total > 0


def test_examples_exist():
    assert len(EXAMPLES) >= 4


def test_warnings_explain_risky_plans():
    p = plan(TrainingScenario(model="llama-3.1-70b", num_gpus=8, zero_stage=0, global_batch_size=8))
    assert not p.memory.fits and p.bottleneck == "capacity"
    assert any(w.startswith("Does not fit") for w in p.warnings)
    assert "optimizer states" in p.bottleneck_reason or "weights" in p.bottleneck_reason
    p = plan(
        TrainingScenario(
            model="llama-3.1-70b",
            num_gpus=64,
            tensor_parallel=8,
            pipeline_parallel=8,
            global_batch_size=8,
            activation_checkpointing="full",
        )
    )
    assert any("pipeline bubble" in w for w in p.warnings)


def test_megatron_fp32_grad_buffer_replaces_the_16_bit_gradients():
    """Megatron-core DDP keeps one grad buffer in the reduce dtype (fp32 with grad_reduce_in_fp32) and no 16-bit
    .grad beside it: 4 B per trainable element where DeepSpeed's fp32 accumulator keeps 2 + 4."""
    s = dict(num_gpus=8, tensor_parallel=2, data_parallel=4, grad_accumulation_fp32=True)
    deepspeed = plan(TrainingScenario(**s)).memory.components
    megatron = plan(TrainingScenario(**s, distributed_optimizer=True))
    components, trainable = megatron.memory.components, megatron.layout.parameters_trainable_per_gpu
    assert components["gradients_bytes"] == pytest.approx(4 * trainable)
    assert components["gradient_accumulation_bytes"] == 0
    assert deepspeed["gradients_bytes"] + deepspeed["gradient_accumulation_bytes"] == pytest.approx(6 * trainable)
    # without fp32 reduction the Megatron buffer is bf16: the 16-bit gradients alone
    bf16 = plan(TrainingScenario(**{**s, "grad_accumulation_fp32": False}, distributed_optimizer=True))
    assert bf16.memory.components["gradients_bytes"] == pytest.approx(2 * trainable)


def test_te_cross_entropy_keeps_one_16_bit_copy_of_the_logits():
    unfused = plan(TrainingScenario(num_gpus=8, micro_batch_size=2, sequence_length=4096))
    te = plan(TrainingScenario(num_gpus=8, micro_batch_size=2, sequence_length=4096, loss_kernel="te"))
    assert te.memory.components["logits_bytes"] == pytest.approx(unfused.memory.components["logits_bytes"] / 6)
    assert te.memory.total_bytes < unfused.memory.total_bytes
    # and moves fewer bytes: per token over the vocabulary, logits read and gradient written (2 x 2 B) plus the
    # loss's own copies written and read (2 x 2 B against 2 x 12 B), at 0.80 of H100's HBM, on 2 x 4096 tokens
    saved = 2 * 4096 * 128_256 * 2 * (12 - 2) / (3.35e12 * 0.80) * te.layout.gradient_accumulation_steps
    assert unfused.performance.step_seconds - te.performance.step_seconds == pytest.approx(saved, rel=1e-9)
    logits = next(e for e in te.equations if e.name == "Logits and loss")
    assert " x 2 x " in logits.substituted
