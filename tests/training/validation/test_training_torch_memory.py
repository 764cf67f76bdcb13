"""Ground truth: the engine's parameter, gradient, optimizer-state and saved-activation bytes against torch
modules and torch.optim optimizers on the CPU (DESIGN.md, Tests).

Model states (real nn.Linear/nn.Embedding parameters, real torch.optim state) must match to the byte.
Saved activations are measured with saved_tensors_hooks (once per storage, parameters and buffers
excluded) on models of real torch layers whose norms are stand-ins for fused GPU kernels (input + fp32
statistics, the engine's assumption; torch_reference explains why). So "exact" below means exact against
that model; with the real, eager torch.nn.RMSNorm, `test_eager_torch_norms_change_only_the_norm_terms`
shows the difference is the norms' alone. Tolerances, and why:
* dense Llama-style model (flash, unfused, full recomputation): exact. Every floating/bool tensor autograd
  keeps is a term of the engine's formula; what the engine leaves out are int64 token/target indices, which
  the test measures separately and bounds (< 1 %).
* MoE: 1 %. Besides routing indices (int64, bounded separately), the Mixtral block keeps the top-k
  probabilities and their sum in fp32 and the gathered bf16 weights (6k + 4 = 16 B per token per MoE layer,
  0.4 % here), which the engine does not count.
* LoRA: exact up to one term the engine keeps as an upper bound: the first layer's input comes from a frozen
  embedding, so its first norm saves nothing (h B + 4 B per token; 1/(2L) of the norm terms).
Optimizer `step` counters (0-dim fp32 tensors on the host, one per parameter tensor) are not optimizer
state the planner counts; they are excluded.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from planner import plan  # noqa: E402
from planner.model.architecture import parameter_counts  # noqa: E402
from planner.training import activations as tact  # noqa: E402
from planner.training.recompute import RECOMPUTE_LEVEL  # noqa: E402
from planner.training.scenario import TrainingScenario  # noqa: E402

from .paper_formulas import korthikanti_layer_activation_bytes  # noqa: E402
from .torch_reference import (  # noqa: E402
    FusedLayerNormFunction,
    FusedRMSNormFunction,
    GPTLayer,
    LlamaStyle,
    model_constants,
    saved_activation_bytes,
    tensor_bytes,
)

DENSE = dict(hidden=128, heads=4, kv_heads=2, head_dim=32, ffn=352, vocab=512, layers=2, seq=64)
MOE = dict(DENSE, experts=4, top_k=2, expert_ffn=96)
DENSE_CONFIG = {
    "model_type": "llama",
    "hidden_size": 128,
    "intermediate_size": 352,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 512,
    "max_position_embeddings": 4096,
}
MOE_CONFIG = {
    **DENSE_CONFIG,
    "model_type": "mixtral",
    "intermediate_size": 96,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
}
BATCH = 2


def scenario(config, **overrides) -> TrainingScenario:
    fields = dict(
        model=config,
        gpu="cpu",
        num_gpus=1,
        zero_stage=0,
        micro_batch_size=BATCH,
        global_batch_size=BATCH,
        sequence_length=DENSE["seq"],
    )
    return TrainingScenario(**{**fields, **overrides})


def batch(cfg, seed=0):
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, cfg["vocab"], (BATCH, cfg["seq"]), generator=g)
    return tokens, torch.roll(tokens, -1, dims=1)


def engine_saved_bytes(s: TrainingScenario) -> float:
    """The engine's activation term for what autograd saves: every layer, the stage edges and the fp32
    log-probabilities (no recomputation working set: it is not saved state)."""
    arch = s.architecture()
    rank = s.lora.rank if s.lora else 0
    activations = tact.ActivationInputs(
        tensor_parallel=1,
        sequence_parallel=False,
        flash_attention=s.flash_attention,
        dropout=s.dropout,
        sequence_length=s.sequence_length,
        bytes_per_element=2.0,
        lora_rank=rank,
        lora_targets=tuple(s.lora.target_modules) if s.lora else (),
        recompute=RECOMPUTE_LEVEL[s.activation_checkpointing],
        recompute_modules=s.recompute_module_set or ("core_attn",),
    )
    per_token = 0.0
    for moe, layers in ((False, arch.num_dense_layers), (True, arch.num_moe_layers)):
        if layers:
            per_token += layers * tact.layer_activation_bytes_per_token(arch, moe, activations)
    per_token += tact.edge_activation_bytes_per_token(arch, 1, False, s.dropout, 1, True, 2.0, frozen_head=rank > 0)
    per_token += tact.logits_saved_bytes_per_token(arch, 1)
    return per_token * s.micro_batch_size * s.sequence_length


def train_step(model, cfg, trainable, optimizer_factory, master=True):
    """One real step: forward, backward, optimizer step (on fp32 masters when `master`). Returns
    (parameter bytes, gradient bytes, optimizer-state bytes incl. masters, activation measurement)."""
    tokens, targets = batch(cfg)
    measured = saved_activation_bytes(lambda: model(tokens, targets), model_constants(model))
    measured["result"].backward()
    if master:
        masters = [p.detach().float().requires_grad_() for p in trainable]
        for m, p in zip(masters, trainable):
            m.grad = p.grad.float()
        opt = optimizer_factory(masters)
    else:
        masters = []
        opt = optimizer_factory(trainable)
    opt.step()
    states = [v for state in opt.state.values() for k, v in state.items() if torch.is_tensor(v) and k != "step"]
    params = tensor_bytes(model.parameters())
    grads = tensor_bytes(p.grad for p in model.parameters() if p.grad is not None)
    return params, grads, tensor_bytes(masters) + tensor_bytes(states), measured


def components(s: TrainingScenario) -> dict:
    return plan(s).memory.components


# ---------------------------------------------------------------------------------------------
# model states


@pytest.mark.parametrize("moe", [False, True])
def test_mixed_bf16_adamw_matches_torch_bytes(moe):
    torch.manual_seed(0)
    cfg = MOE if moe else DENSE
    model = LlamaStyle(cfg, torch.bfloat16, moe=moe)
    trainable = list(model.parameters())
    params, grads, states, _ = train_step(model, cfg, trainable, lambda ps: torch.optim.AdamW(ps, lr=1e-3))
    s = scenario(MOE_CONFIG if moe else DENSE_CONFIG, precision="mixed_bf16", optimizer="adamw")
    c = components(s)
    assert sum(p.numel() for p in trainable) == parameter_counts(s.architecture()).total
    assert c["weights_bytes"] == params
    assert c["gradients_bytes"] == grads
    assert c["optimizer_states_bytes"] == states  # fp32 master + exp_avg + exp_avg_sq = 12 B/param


@pytest.mark.parametrize(
    "optimizer,precision,factory",
    [
        ("adamw", "fp32", lambda ps: torch.optim.AdamW(ps, lr=1e-3)),
        ("adamw", "amp_bf16", lambda ps: torch.optim.AdamW(ps, lr=1e-3)),
        ("sgd_momentum", "fp32", lambda ps: torch.optim.SGD(ps, lr=1e-3, momentum=0.9)),
        ("sgd", "fp32", lambda ps: torch.optim.SGD(ps, lr=1e-3)),
        ("adafactor", "fp32", lambda ps: torch.optim.Adafactor(ps, lr=1e-3)),
    ],
)
def test_fp32_parameter_optimizers_match_torch_bytes(optimizer, precision, factory):
    torch.manual_seed(0)
    # amp_bf16 keeps fp32 parameters, gradients and state; autocast only changes the matmul dtype.
    model = LlamaStyle(DENSE, torch.float32)
    params, grads, states, _ = train_step(model, DENSE, list(model.parameters()), factory, master=False)
    c = components(scenario(DENSE_CONFIG, precision=precision, optimizer=optimizer))
    assert (c["weights_bytes"], c["gradients_bytes"], c["optimizer_states_bytes"]) == (params, grads, states)


def test_pure_bf16_adamw_keeps_bf16_state():
    torch.manual_seed(0)
    model = LlamaStyle(DENSE, torch.bfloat16)
    params, grads, states, _ = train_step(
        model, DENSE, list(model.parameters()), lambda ps: torch.optim.AdamW(ps, lr=1e-3), master=False
    )
    c = components(scenario(DENSE_CONFIG, precision="bf16", optimizer="adamw"))
    assert (c["weights_bytes"], c["gradients_bytes"], c["optimizer_states_bytes"]) == (params, grads, states)


def test_lora_adapters_only_have_gradients_and_state():
    torch.manual_seed(0)
    rank = 8
    model = LlamaStyle(DENSE, torch.bfloat16, lora_rank=rank)
    trainable = [p for p in model.parameters() if p.requires_grad]
    params, grads, states, measured = train_step(model, DENSE, trainable, lambda ps: torch.optim.AdamW(ps, lr=1e-3))
    s = scenario(DENSE_CONFIG, precision="mixed_bf16", lora={"rank": rank})
    p = plan(s)
    assert p.layout.parameters_trainable == sum(t.numel() for t in trainable)
    c = p.memory.components
    assert (c["weights_bytes"], c["gradients_bytes"], c["optimizer_states_bytes"]) == (params, grads, states)
    engine = engine_saved_bytes(s)
    # The engine is an upper bound: with a frozen embedding the first layer's first norm input needs no
    # gradient and is not saved (h x 2 B + 4 B of statistics per token); everything else matches exactly.
    tokens = BATCH * DENSE["seq"]
    assert engine - measured["activations"] == tokens * (DENSE["hidden"] * 2 + 4)


# ---------------------------------------------------------------------------------------------
# saved activations


@pytest.mark.parametrize("flash", [True, False])
def test_dense_saved_activations_exact_with_fused_norm_stand_ins(flash):
    torch.manual_seed(0)
    cfg = dict(DENSE, flash=flash)
    model = LlamaStyle(cfg, torch.bfloat16)
    tokens, targets = batch(cfg)
    measured = saved_activation_bytes(lambda: model(tokens, targets), model_constants(model))
    engine = engine_saved_bytes(scenario(DENSE_CONFIG, flash_attention=flash))
    assert measured["activations"] == engine
    assert measured["indices"] < 0.01 * engine  # token ids and targets, int64


def test_eager_torch_norms_change_only_the_norm_terms():
    """The same dense model with the real torch.nn.RMSNorm instead of the fused-kernel stand-in. Eager RMSNorm on
    the CPU saves fp32 copies of its input rather than the 16-bit input (what it saves is measured on one norm
    here, not assumed); every other saved tensor is unchanged, so the model saves exactly the engine's bytes
    plus 5 norms (2 per layer + the final one) x that difference."""
    torch.manual_seed(0)
    tokens, targets = batch(DENSE)
    fused = LlamaStyle(DENSE, torch.bfloat16)
    eager = LlamaStyle(DENSE, torch.bfloat16, eager_norms=True)
    assert isinstance(eager.norm, torch.nn.RMSNorm)
    measured_fused = saved_activation_bytes(lambda: fused(tokens, targets), model_constants(fused))
    measured_eager = saved_activation_bytes(lambda: eager(tokens, targets), model_constants(eager))

    def one_norm(norm):
        x = torch.randn(BATCH, DENSE["seq"], DENSE["hidden"], dtype=torch.bfloat16, requires_grad=True)
        return saved_activation_bytes(lambda: norm(x), list(norm.parameters()))["activations"]

    per_norm = one_norm(eager.norm) - one_norm(fused.norm)
    assert per_norm > 0  # eager keeps more than a fused kernel: the engine is a lower bound for eager CPU norms
    engine = engine_saved_bytes(scenario(DENSE_CONFIG))
    assert measured_fused["activations"] == engine
    assert measured_eager["activations"] == engine + (2 * DENSE["layers"] + 1) * per_norm


def test_full_recomputation_saves_only_layer_inputs():
    torch.manual_seed(0)
    model = LlamaStyle(DENSE, torch.bfloat16, checkpoint_layers=True)
    tokens, targets = batch(DENSE)
    measured = saved_activation_bytes(lambda: model(tokens, targets), model_constants(model))
    s = scenario(DENSE_CONFIG, activation_checkpointing="full")
    assert measured["activations"] == engine_saved_bytes(s)
    # and backward still works through the checkpoints
    measured["result"].backward()
    assert all(p.grad is not None for p in model.parameters())


@pytest.mark.parametrize("modules", ["core_attn", "mlp", "core_attn,mlp"])
def test_selective_modules_save_what_checkpointing_them_leaves(modules):
    """Megatron-core's selective modules as torch.utils.checkpoint regions: core_attn around the fused attention
    kernel (its q, k, v inputs stay; o_proj keeps the output; only the log-sum-exp goes), mlp around the SwiGLU
    block (its normalized input stays, its four tensors go). Exact against the engine's selective level."""
    torch.manual_seed(0)
    cfg = dict(DENSE, recompute_modules=tuple(modules.split(",")))
    model = LlamaStyle(cfg, torch.bfloat16)
    tokens, targets = batch(cfg)
    measured = saved_activation_bytes(lambda: model(tokens, targets), model_constants(model))
    s = scenario(DENSE_CONFIG, activation_checkpointing="selective", recompute_modules=modules)
    assert measured["activations"] == engine_saved_bytes(s)
    plain = engine_saved_bytes(scenario(DENSE_CONFIG))
    tokens_total = BATCH * DENSE["seq"]
    # what each module frees, per token per layer: core_attn the fp32 log-sum-exp, 4 B x 4 heads = 16 B; mlp the
    # SwiGLU tensors, 4 x 352 x 2 B = 2,816 B; 2 layers
    freed = {"core_attn": 16, "mlp": 2816, "core_attn,mlp": 16 + 2816}[modules]
    assert plain - measured["activations"] == tokens_total * 2 * freed
    measured["result"].backward()
    assert all(p.grad is not None for p in model.parameters())


def test_moe_saved_activations_within_one_percent():
    torch.manual_seed(0)
    model = LlamaStyle(MOE, torch.bfloat16, moe=True)
    tokens, targets = batch(MOE)
    measured = saved_activation_bytes(lambda: model(tokens, targets), model_constants(model))
    engine = engine_saved_bytes(scenario(MOE_CONFIG))
    assert measured["activations"] == pytest.approx(engine, rel=0.01)
    assert measured["activations"] >= engine  # what is left out is small fp32 routing weights, never extra terms
    assert measured["indices"] < 0.03 * engine  # routing and token indices, int64


def test_gpt_layer_matches_korthikanti_table_2():
    """Korthikanti et al.'s own layer (dropout, GeLU 4h, unfused attention): 34 sbh + 5 a s^2 b bytes, plus the
    fp32 LayerNorm statistics (2 x 8 B per token) the paper leaves out (the norms are the fused-kernel stand-ins;
    eager CPU LayerNorm keeps 16-bit statistics); and the engine's adapted formula for a GPT architecture gives
    the same number."""
    torch.manual_seed(0)
    s, b, h, a = 64, 2, 128, 4
    layer = GPTLayer(h, a, torch.bfloat16)
    x = torch.randn(b, s, h, dtype=torch.bfloat16, requires_grad=True)
    mask = torch.ones(s, s, dtype=torch.bool).triu(1)
    measured = saved_activation_bytes(lambda: layer(x, mask), [*layer.parameters(), mask])
    paper = korthikanti_layer_activation_bytes(s, b, h, a)
    assert paper == s * b * h * (34 + 5 * a * s / h)
    assert measured["activations"] == paper + 2 * 8 * s * b
    gpt = TrainingScenario(
        model={"model_type": "gpt2", "n_embd": h, "n_head": a, "n_layer": 1, "n_positions": s, "vocab_size": 512},
        gpu="cpu",
        num_gpus=1,
        zero_stage=0,
        micro_batch_size=b,
        global_batch_size=b,
        sequence_length=s,
        flash_attention=False,
        dropout=True,
    )
    activations = tact.ActivationInputs(1, False, False, True, s)
    engine = tact.layer_activation_bytes_per_token(gpt.architecture(), False, activations) * s * b
    assert engine == measured["activations"]


def test_reference_norm_kernels_have_correct_gradients():
    torch.manual_seed(0)
    x = torch.randn(3, 5, 16, requires_grad=True)
    w = torch.randn(16, requires_grad=True)
    bias = torch.randn(16, requires_grad=True)
    g = torch.randn(3, 5, 16)
    ours = torch.autograd.grad((FusedRMSNormFunction.apply(x, w, 1e-5) * g).sum(), (x, w))
    ref = torch.autograd.grad((torch.nn.functional.rms_norm(x, (16,), w, 1e-5) * g).sum(), (x, w))
    for a, r in zip(ours, ref):
        torch.testing.assert_close(a, r, rtol=1e-4, atol=1e-5)
    ours = torch.autograd.grad((FusedLayerNormFunction.apply(x, w, bias, 1e-5) * g).sum(), (x, w, bias))
    ref = torch.autograd.grad((torch.nn.functional.layer_norm(x, (16,), w, bias, 1e-5) * g).sum(), (x, w, bias))
    for a, r in zip(ours, ref):
        torch.testing.assert_close(a, r, rtol=1e-4, atol=1e-5)
