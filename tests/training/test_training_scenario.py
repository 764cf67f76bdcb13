"""TrainingScenario: defaults, derived layout, and every invalid layout explained in a sentence."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from planner import PlanningError, parse_scenario
from planner.errors import explain
from planner.training.scenario import TrainingScenario


def test_default_is_llama_8b_on_8_h100_with_zero_1():
    s = TrainingScenario()
    assert (s.model, s.gpu, s.num_gpus, s.dp, s.zero_stage) == ("llama-3.1-8b", "h100-sxm", 8, 8, 1)
    assert s.gradient_accumulation_steps == 64 // (1 * 8)
    assert s.tokens_per_step == 64 * 4096


def test_parse_dispatches_on_kind_and_round_trips():
    s = parse_scenario({"kind": "training", "tensor_parallel": 2, "lora": {"rank": 8}})
    assert isinstance(s, TrainingScenario) and s.dp == 4
    again = parse_scenario(s.model_dump(mode="json"))
    assert again == s


def test_distributed_optimizer_shards_like_zero_1():
    assert TrainingScenario(zero_stage=0, distributed_optimizer=True).effective_zero_stage == 1


@pytest.mark.parametrize(
    "fields,sentence",
    [
        (dict(num_gpus=8, tensor_parallel=2, data_parallel=8), "= 16 GPUs, but num_gpus is 8"),
        (
            dict(num_gpus=6, tensor_parallel=4),
            "not a multiple of tensor_parallel x pipeline_parallel x context_parallel",
        ),
        (dict(global_batch_size=60), "global_batch_size=60 is not a multiple of micro_batch_size x data_parallel"),
        (dict(tensor_parallel=3, num_gpus=3), "does not divide the model's 32 attention heads"),
        (dict(pipeline_parallel=64, num_gpus=64), "more stages than the model's 32 layers"),
        (dict(context_parallel=2, flash_attention=False), "context_parallel > 1 needs flash_attention"),
        (dict(context_parallel=2, sequence_length=4098), "multiple of 2 x context_parallel"),
        (dict(expert_parallel=2), "needs a mixture-of-experts model"),
        (
            dict(model="mixtral-8x7b", expert_parallel=3, num_gpus=6, global_batch_size=6),
            "does not divide the model's 8",
        ),
        (
            dict(model="mixtral-8x7b", expert_parallel=8, num_gpus=16, tensor_parallel=4, global_batch_size=16),
            "must divide data_parallel=4",
        ),
        (dict(virtual_pipeline_stages=2), "needs pipeline_parallel > 1"),
        (dict(pipeline_parallel=2, virtual_pipeline_stages=3, num_gpus=8), "split evenly"),
        (
            dict(pipeline_parallel=4, virtual_pipeline_stages=2, num_gpus=8, global_batch_size=6, micro_batch_size=1),
            "multiple of pipeline_parallel=4",
        ),
        (dict(zero_stage=2, distributed_optimizer=True), "distributed optimizer shards optimizer state only"),
        (dict(zero_stage=2, offload_parameters=True), "offload_parameters needs zero_stage 3"),
        (dict(zero_stage=0, offload_optimizer=True), "offload_optimizer needs zero_stage >= 1"),
        (dict(precision="fp32", lora={"quantize_base": True}), "QLoRA computes in 16 bits"),
        (dict(lora={"target_modules": []}), "at least one target module"),
    ],
)
def test_invalid_layouts_raise_a_sentence(fields, sentence):
    with pytest.raises((PlanningError, ValidationError)) as info:
        TrainingScenario(**fields)
    assert sentence in explain(info.value)


def test_unknown_fields_are_rejected():
    with pytest.raises(ValidationError):
        TrainingScenario(activation_checkpointing="sometimes")
    with pytest.raises(ValidationError):
        TrainingScenario(zero_stage=4)
    with pytest.raises(ValidationError):
        TrainingScenario(bogus=1)
