"""Low-rank adapters (LoRA, Hu et al. 2021, arXiv:2106.09685): their parameters on one GPU and their FLOPs per
token, one home for training (`planner.training`) and serving (`planner.inference.lora`).

An adapter on a projection W (d_in x d_out) is A (r x d_in) and B (d_out x r): r (d_in + d_out) parameters and
2 r (d_in + d_out) FLOPs per token (x A, then B). Under tensor parallelism a column-parallel projection keeps A
whole and splits B, a row-parallel one splits A and keeps B whole: PEFT/Megatron's layout, and vLLM's
(`vllm/lora/layers`: `ColumnParallelLinearWithLoRA` shards `lora_b`, `RowParallelLinearWithLoRA` shards `lora_a`,
with `fully_sharded_loras` off, its default).
"""

from __future__ import annotations

from planner.model.architecture import ModelArchitecture
from planner.physics.memory import stage_layers
from planner.physics.projections import Matrix, layer_matrices, local_shape, stage_layers_total


def lora_adapter_elements(
    arch: ModelArchitecture,
    rank,
    target_modules,
    tensor_parallel,
    pipeline_parallel,
    expert_parallel,
    experts: str = "include",
    layers=None,
):
    """LoRA adapter parameters (A: r x d_in, B: d_out x r per targeted projection) on one GPU of the most
    loaded stage. Column-parallel projections keep A whole and split B; row-parallel ones split A and keep
    B whole (PEFT/Megatron LoRA layout). MLP targets apply to every expert. `experts="only"` counts only the
    routed-expert adapters (they shard over DP / EP); `"skip"` leaves them out (serving engines wrap the dense
    projections)."""
    targets = set(target_modules)

    def per_layer(moe_layer: bool):
        total = 0.0
        for m in layer_matrices(arch, moe_layer):
            if m.module not in targets or (experts == "only" and not m.expert) or (experts == "skip" and m.expert):
                continue
            d_in, d_out, copies = local_shape(m, arch, tensor_parallel, expert_parallel)
            total = total + copies * rank * (d_in + d_out)
        return total

    return stage_layers_total(arch, pipeline_parallel, layers, per_layer)


# The projections a serving engine wraps as one LoRA layer (vLLM packs q/k/v into qkv_proj and gate/up into
# gate_up_proj; SGLang the same): one shrink reads the group's input once.
PACKED_GROUPS = {"q": "qkv", "k": "qkv", "v": "qkv", "o": "o", "gate": "gate_up", "up": "gate_up", "down": "down"}


def _wrapped(arch: ModelArchitecture, targets: set, moe_layer: bool) -> list[tuple[tuple[str, int], Matrix]]:
    """The projections of one layer a serving engine wraps (routed experts carry no adapters), each with its
    wrapped LoRA layer: a packed group and its input width (vLLM's qkv_proj, o_proj, gate_up_proj, down_proj; an
    MLA layer's fused_qkv_a, q_b, kv_b and o_proj, whose inputs differ)."""
    return [
        ((PACKED_GROUPS.get(m.module, m.module), m.d_in), m)
        for m in layer_matrices(arch, moe_layer)
        if m.module in targets and not m.expert
    ]


def lora_wrapped_layers(arch: ModelArchitecture, target_modules, pipeline_parallel):
    """Wrapped LoRA layers per pass through one layer, the mean over the most loaded stage's layers."""
    targets = set(target_modules)
    total = stage_layers_total(
        arch, pipeline_parallel, None, lambda moe: len({k for k, _ in _wrapped(arch, targets, moe)})
    )
    return total / stage_layers(arch, pipeline_parallel)


def lora_activation_elements_per_token(arch: ModelArchitecture, target_modules, tensor_parallel, pipeline_parallel):
    """Activation elements the adapters' kernels move per token on one GPU of the most loaded stage (routed experts
    carry no adapters): the shrink (x A) reads each wrapped layer's input, the expand adds x A B into the base
    projection's output in place, reading and writing it (vLLM's punica wrapper `add_lora_linear`: `add_shrink`
    then `add_expand` with `add_inputs=True`). Their fp32 intermediate (tokens x r) is left out: r is small. Each
    input counted once per wrapped layer: the kernels re-read it per slice, from L2 at best."""
    targets = set(target_modules)

    def per_layer(moe_layer: bool):
        total, inputs = 0.0, {}
        for key, m in _wrapped(arch, targets, moe_layer):
            d_in, d_out, copies = local_shape(m, arch, tensor_parallel, 1)
            total = total + 2 * copies * d_out
            inputs[key] = d_in
        return total + sum(inputs.values())

    return stage_layers_total(arch, pipeline_parallel, None, per_layer)


def lora_forward_flops_per_token(arch: ModelArchitecture, rank, target_modules, moe_layer: bool):
    """x A B for every targeted projection of one layer: 2 r (d_in + d_out) FLOPs; a token runs the adapters
    of its k routed experts only."""
    if not rank:
        return 0.0
    total = 0.0
    for m in layer_matrices(arch, moe_layer):
        if m.module in target_modules:
            copies = arch.experts_per_token if m.expert else m.count
            total += copies * 2 * rank * (m.d_in + m.d_out)
    return total
