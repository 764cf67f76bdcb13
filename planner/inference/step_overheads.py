"""Time of an inference step beyond its kernels' roofline: the collectives and pipeline hand-offs of its tokens,
each forward pass's fixed launch and fused-MoE time, the host's scheduling and the sampler, and a request's
one-off API-server cost. One function per term; each broadcasts over numpy arrays (DESIGN rule 4).
`planner.inference.steps.compose_step` adds them up.
"""

from __future__ import annotations

from planner.arrays import maximum, where
from planner.inference.inputs import HardwareInputs, InferenceInputs, ReplicaShape
from planner.model.architecture import ModelArchitecture
from planner.physics import communication
from planner.physics import memory as mem
from planner.physics.efficiency import EfficiencyFigures
from planner.physics.gemm_efficiency import BLOCK_FP8_SMALL_M_GEMM_SECONDS, block_fp8_gemms_per_layer
from planner.physics.moe_efficiency import MOE_LAYER_GEMMS, moe_layer_extra_seconds
from planner.physics.runtimes import RuntimeProfile, runtime_profile


def moe_overhead_seconds(arch: ModelArchitecture, pipeline_parallel, hw: HardwareInputs, efficiency: EfficiencyFigures):
    """Fixed time of one forward pass's fused-MoE calls on one stage beyond the layers' GEMM tails
    (`moe_efficiency.moe_layer_extra_seconds`); 0 for a dense model."""
    if not arch.is_moe:
        return 0.0
    return moe_layer_extra_seconds(
        mem.stage_moe_layers(arch, pipeline_parallel),
        efficiency.moe_layer_seconds,
        hw.gemm_tail_seconds,
        hw.is_accelerator,
    )


# ---------------------------------------------------------------------------------------------
# time beyond the roofline: communication and launch overhead


# Collectives per engine step (`planner.physics.communication`): two tensor-parallel all-reduces per layer (after
# attention and after the MLP), for a MoE model two all-to-alls per MoE layer (dispatch and combine) when the
# experts spread beyond the tensor group, and PP - 1 hand-offs between the stages.
TP_ALLREDUCES_PER_LAYER = 2
EP_ALL_TO_ALLS_PER_MOE_LAYER = 2


def step_collective_seconds(arch: ModelArchitecture, inputs: InferenceInputs, shape: ReplicaShape, tokens, efficiency):
    """Collectives of one engine step of `tokens` tokens on one stage: the tensor-parallel all-reduces of their
    hidden states (each by the fastest algorithm for its size on the link: one-shot / two-shot where
    `link.peer_access`, ring / tree), and for a MoE model the all-to-alls to experts beyond the tensor group
    (0 when expert_parallel <= tensor_parallel)."""
    message = communication.hidden_state_message_bytes(tokens, arch.hidden_size, inputs.activation_bytes_per_element)
    seconds = communication.tensor_parallel_seconds(
        shape.stage_layers,
        TP_ALLREDUCES_PER_LAYER,
        message,
        inputs.tensor_parallel,
        shape.tensor_link,
        efficiency.communication,
    )
    if not arch.is_moe:
        return seconds
    all_to_all = communication.expert_all_to_all_seconds(
        mem.stage_moe_layers(arch, inputs.pipeline_parallel),
        EP_ALL_TO_ALLS_PER_MOE_LAYER,
        communication.hidden_state_message_bytes(
            tokens * arch.experts_per_token, arch.hidden_size, inputs.activation_bytes_per_element
        ),
        inputs.expert_parallel,
        shape.expert_link,
        efficiency.communication,
    )
    return seconds + where(inputs.expert_parallel > inputs.tensor_parallel, all_to_all, 0.0)


def step_handoff_seconds(arch: ModelArchitecture, inputs: InferenceInputs, shape: ReplicaShape, tokens, efficiency):
    """Pipeline hand-offs of one engine step of `tokens` tokens: their hidden states sent between consecutive
    stages, PP - 1 times."""
    message = communication.hidden_state_message_bytes(tokens, arch.hidden_size, inputs.activation_bytes_per_element)
    return communication.pipeline_p2p_seconds(
        inputs.pipeline_parallel - 1, message, shape.pipeline_link, efficiency.communication
    )


def block_fp8_floor_seconds_per_layer(
    arch: ModelArchitecture, pipeline_parallel, stage_layers, hw: HardwareInputs, runtime: RuntimeProfile
):
    """The least time a layer's dense GEMMs over block-scaled FP8 weights on Hopper take: each of them
    (`gemm_efficiency.block_fp8_gemms_per_layer`) at the release's small-M kernel time
    (`gemm_efficiency.BLOCK_FP8_SMALL_M_GEMM_SECONDS`, `RuntimeProfile.block_fp8_linear_kernel`), plus the
    routed experts' pair of plain tails in MoE layers (which the fused-MoE call's fixed time counts on). A floor,
    not an addition: large prefill GEMMs run at the block-FP8 ceiling, which already holds the kernels' fixed time.
    0 for other weights and devices, and for engines whose block-FP8 kernels have no published small-M time."""
    if runtime.block_fp8_linear_kernel is None:
        return 0.0
    moe_layers = mem.stage_moe_layers(arch, pipeline_parallel) if arch.is_moe else 0
    shared = moe_layers if arch.shared_expert_intermediate_size else 0
    block = block_fp8_gemms_per_layer(stage_layers, stage_layers - moe_layers, shared)
    kernel = BLOCK_FP8_SMALL_M_GEMM_SECONDS[runtime.block_fp8_linear_kernel]
    # a MoE layer's routed pair keeps its plain tails here: `moe_overhead_seconds` takes them off the fused-MoE call
    routed_pair = MOE_LAYER_GEMMS * moe_layers / maximum(stage_layers, 1)
    floor = block * kernel + routed_pair * hw.gemm_tail_seconds
    return where(hw.block_fp8_dense, floor, 0.0)


def launch_overhead_seconds(stage_layers, efficiency: EfficiencyFigures):
    """Fixed per-layer cost of a forward step on one stage (kernel launches, synchronisation, small ops):
    what makes batch-1 decode slower than its bandwidth roofline. Fitted by the calibration's probe."""
    return stage_layers * efficiency.layer_overhead_seconds


def scheduler_seconds(sequences, efficiency: EfficiencyFigures, host_work_overlapped: bool = False):
    """CPU time of one engine step that the GPU waits for: a fixed cost (scheduling, input preparation)
    plus a cost per scheduled sequence (post-step bookkeeping). Once per engine step, whatever the
    pipeline depth. Defaults from vLLM V1 measurements (see `Efficiency`); the calibration's torch probe
    runs no engine, so it never refines them. None is exposed where the runtime overlaps that work with the
    GPU's (`RuntimeProfile.host_work_overlapped`: SGLang's and TensorRT-LLM's overlap schedulers)."""
    if host_work_overlapped:
        return 0.0 * sequences
    return efficiency.step_host_seconds + sequences * efficiency.sequence_host_seconds


def host_work_overlapped(inputs: InferenceInputs) -> bool:
    """Whether the scenario's runtime hides its per-step CPU work behind the GPU's (`scheduler_seconds`)."""
    return runtime_profile(inputs.runtime).host_work_overlapped


def sampler_seconds(sequences, vocab_size, efficiency: EfficiencyFigures):
    """Sampling one token for each of `sequences` sequences: top-k / top-p over `vocab_size` logits each
    (the logits themselves are the lm_head's FLOPs, counted in the step's compute)."""
    return sequences * vocab_size * efficiency.sampler_seconds_per_logit


def request_overhead_seconds(efficiency: EfficiencyFigures):
    """Per request, once, before its first engine step: chat template, tokenisation and request set-up in
    the API server. Latency only (TTFT): it runs beside the GPU's work for other requests."""
    return efficiency.request_overhead_seconds
