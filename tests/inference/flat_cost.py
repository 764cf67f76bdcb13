"""A step cost for scheduler tests that are about blocks and order, not time."""

from __future__ import annotations

import numpy as np

STEP_SECONDS = 0.01


class FlatCost:
    """Every step costs 10 ms whatever it holds; records the decode batch of every step with prompt chunks."""

    def __init__(self) -> None:
        self.decodes_in_prompt_steps: list[int] = []

    def mixed_seconds(self, decode_batch, decode_context_tokens, spans):
        self.decodes_in_prompt_steps.append(decode_batch)
        return STEP_SECONDS

    def decode_seconds(self, decode_batch, decode_context_tokens):
        return np.full(len(decode_context_tokens), STEP_SECONDS)

    def decode_step_seconds(self, decode_batch, decode_context_tokens):
        return STEP_SECONDS

    def shortest_decode_seconds(self, decode_batch):
        return STEP_SECONDS
