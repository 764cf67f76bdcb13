"""Scenarios several training tests work by hand."""

from __future__ import annotations

from planner.training.scenario import TrainingScenario

# Llama-3.1-8B: hidden 4096, 32 heads of 128, 8 KV heads, MLP 14336, 32 layers, vocabulary 128,256
LLAMA8B_TOKENS = 8192


def llama8b_h100(**fields) -> TrainingScenario:
    """Llama-3.1-8B on 8 x H100, one sequence of 8192 tokens per micro-batch, one micro-batch per GPU."""
    base = {
        "model": "llama-3.1-8b",
        "gpu": "h100-sxm",
        "num_gpus": 8,
        "micro_batch_size": 1,
        "global_batch_size": 8,
        "sequence_length": LLAMA8B_TOKENS,
    }
    return TrainingScenario.model_validate({**base, **fields})
