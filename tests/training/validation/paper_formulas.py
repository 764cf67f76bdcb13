"""Published formulas the reference tests compare the engine with; the engine itself never uses them.

Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models"), Table 2: activation
bytes of one GPT transformer layer (16-bit activations, 1-byte dropout masks,
GeLU MLP of width 4h, no FlashAttention). The engine does not use it: its own, architecture-aware
formula is `planner.training.activations.layer_activation_bytes_per_token`, which the reference tests reduce
to this table for a GPT layer. `test_korthikanti_table_2_verbatim` checks this transcription against the
formulas as shared/reference/memory_measured.csv records them (M014-M019).

    no parallelism            sbh (34 + 5as/h)
    tensor parallel           sbh (10 + 24/t + 5as/(ht))
    tensor + sequence par.    sbh (34/t + 5as/(ht))
    + selective recompute     sbh (10 + 24/t)   |  sbh (34/t)
    full recompute            2 sbh
"""

from __future__ import annotations


def korthikanti_layer_activation_bytes(s, b, h, a, t=1, sequence_parallel=False, recompute="none"):
    sbh = s * b * h
    if recompute == "full":
        return 2 * sbh
    attention_core = 0 if recompute == "selective" else 5 * a * s / (h * t)
    if sequence_parallel:
        return sbh * (34 / t + attention_core)
    return sbh * (10 + 24 / t + attention_core)


def megatron_flops_per_step(batch, seq, layers, hidden, vocab, recompute_full=True):
    """Narayanan et al. 2021, Eq. 3: 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) with full recomputation
    (72 instead of 96 without). The paper's TFLOP/s numerator: GPT with a 4h GeLU MLP, dense (non-causal)
    attention, biases and norms ignored."""
    factor = 96 if recompute_full else 72
    return factor * batch * seq * layers * hidden**2 * (1 + seq / (6 * hidden) + vocab / (16 * layers * hidden))
