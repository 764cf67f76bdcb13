"""Inference: the scenario, the plan (memory, prefill/decode steps, cost) and its result types."""
