"""What a training plan says in words and equations: the bottleneck, warnings, assumptions and the
equations with their numbers filled in (DESIGN rules 5 and 7). Reads the plan's typed results only."""

from __future__ import annotations

from dataclasses import dataclass, replace

from planner.calibration_record import CalibrationRecord
from planner.model.architecture import ModelArchitecture, ParameterCounts
from planner.model.notes import architecture_assumptions
from planner.physics import attention_efficiency, gemm_efficiency
from planner.physics.efficiency import REFERENCE_ELEMENTWISE_SHARE, TRAINING_EFFICIENCY_END_TO_END, Efficiency
from planner.physics.memory import stage_layers
from planner.results import Bottleneck, Equation, HardwareSummary, MemoryBreakdown
from planner.training import activations as tact
from planner.training import kernel_notes, step_time
from planner.training import memory as tmem
from planner.training import precision as tprec
from planner.training.recompute import RECOMPUTE_LEVEL, Recompute, full_recompute_fraction
from planner.training.results import TrainingCost, TrainingEnergy, TrainingLayout, TrainingPerformance
from planner.training.scenario import TrainingScenario
from planner.training.step import microbatch_gemm_kernels
from planner.units import count, gib, percent, rate, seconds, usd

COMMUNICATION_KEYS = (
    "tensor_parallel_seconds",
    "expert_parallel_seconds",
    "pipeline_p2p_seconds",
    "overlapped_communication_exposed_seconds",
    "data_parallel_seconds",
    "offload_transfer_seconds",
)


def bottleneck(memory: MemoryBreakdown, perf: TrainingPerformance) -> tuple[Bottleneck, str]:
    if not memory.fits:
        return "capacity", (
            f"The plan needs {gib(memory.total_bytes)} per GPU but the device has {gib(memory.capacity_bytes)}; "
            f"the largest part is {memory.dominant_component.removesuffix('_bytes').replace('_', ' ')} "
            f"({gib(memory.components[memory.dominant_component])}): memory capacity binds before anything else."
        )
    t = perf.step_breakdown_seconds
    fb = perf.forward_backward
    memory_bound = fb.memory_seconds > fb.compute_seconds
    communication = sum(t[key] for key in COMMUNICATION_KEYS)
    work = t["forward_backward_seconds"]
    times: dict[Bottleneck, float] = {
        "compute": 0.0 if memory_bound else work,
        "memory_bandwidth": (work if memory_bound else 0.0) + t["optimizer_step_seconds"],
        "communication": communication,
    }
    binding = max(times, key=times.__getitem__)
    step = perf.step_seconds
    reason = (
        f"Of a {seconds(step)} step, forward and backward take {percent(work / step)}"
        f"{' (memory-bound)' if memory_bound else ''}, exposed communication {percent(communication / step)}, "
        f"the pipeline bubble {percent(t['pipeline_bubble_seconds'] / step)} and the optimizer step "
        f"{percent(t['optimizer_step_seconds'] / step)}; MFU {percent(perf.mfu, 1)}, HFU {percent(perf.hfu, 1)}."
    )
    return binding, reason


def recompute_assumption(s: TrainingScenario, arch: ModelArchitecture) -> str | None:
    """What the chosen recomputation keeps and repeats, with its source."""
    mode = s.activation_checkpointing
    if mode == "selective":
        return (
            f"Selective recomputation of {', '.join(s.recompute_module_set)} (Megatron-core --recompute-granularity "
            "selective --recompute-modules; TransformerConfig.recompute_modules in megatron/core/transformer/"
            "transformer_config.py): core_attn checkpoints the attention kernel (drops the score matrix, or only "
            "FlashAttention's log-sum-exp, and runs its forward again); layernorm discards the two normalized inputs "
            "and recomputes the norms (output-discarding checkpoint; assumes norms not fused into the QKV/FC1 "
            "linear); mlp / moe / shared_experts checkpoint that block (keep its input, repeat its matmuls and its "
            "tensor-parallel reduction); moe_act discards the experts' activation output; mla_up_proj discards MLA's "
            "q, k and kv up-projection outputs and repeats those matmuls. Recomputed norms and activations are charged "
            "as bytes at the memory roofline, not FLOPs."
        )
    if mode == "op":
        return (
            "Op-level recomputation as torchtitan's selective_ac_option 'op' (torchtitan/distributed/"
            "activation_checkpoint.py: the save list holds aten.mm and the SDPA kernels, and the policy 'saves "
            "output of all compute ops, except every second mm'): per layer the input, the outputs of q, v, the "
            "first MLP projection and the down projection (the 1st, 3rd, 5th, 7th matmul), and the fused attention's "
            "output and log-sum-exp are kept; norms, RoPE, activations and the k, o and up projections are "
            "recomputed (their matmul FLOPs charged). A MoE layer's expert block is kept whole."
        )
    if mode == "full":
        if s.recompute_method == "block":
            return (
                f"Full recomputation, block method: the first {s.recompute_num_layers} layers of each stage (model "
                "chunk) keep only their input and run their forward again; the rest keep everything (Megatron-core "
                "--recompute-method block --recompute-num-layers)."
            )
        if s.recompute_num_layers > 1:
            return (
                f"Full recomputation, uniform method in groups of {s.recompute_num_layers} layers: one input kept per "
                "group, the whole group rebuilt while its backward runs (Megatron-core --recompute-method uniform "
                "--recompute-num-layers)."
            )
    return None


def _tensor_parallel_overlap(s: TrainingScenario) -> str:
    if s.tp_comm_overlap:
        return (
            "tensor-parallel all-gathers and reduce-scatters are split into TP chunks pipelined with their GEMMs "
            "(Transformer Engine userbuffers, tp_comm_overlap): one chunk of each stays exposed"
        )
    if s.overlap_tp_backward:
        return (
            "the backward's tensor-parallel collectives run under the weight-gradient GEMMs, the forward's are exposed"
        )
    return "tensor-parallel collectives are exposed"


def assumptions_for(
    s: TrainingScenario, arch: ModelArchitecture, efficiency: Efficiency, calibration: CalibrationRecord | None
) -> list[str]:
    """What every training estimate rests on, then what this scenario's choices add."""
    out = _general_assumptions(s, efficiency) + _lora_assumptions(s)
    out += architecture_assumptions(arch) + _recipe_assumptions(s, arch)
    if calibration is not None:
        out.append(f"Calibrated with '{calibration.label}': efficiencies and runtime overhead from a measured profile.")
    return out


def _general_assumptions(s: TrainingScenario, efficiency: Efficiency) -> list[str]:
    """Stages, precision, model states, activations, logits, step time, communication, MFU and overhead."""
    p = tprec.PRECISIONS[s.precision]
    uneven = s.stage_layer_counts()
    stages = (
        "Memory is per GPU on the most loaded pipeline stage (the first stage holds the most in-flight micro-batches, "
        "the last the output head and logits; the larger total is reported). "
        if uneven is None
        else f"Memory is per GPU on the most loaded of the first ({uneven[0]} layers, p micro-batches in flight), the "
        f"second ({uneven[1]} layers, p - 1 in flight; Megatron 1F1B) and the last stage ({uneven[2]} layers, the "
        "output head and logits), as Megatron-core's --decoder-first-pipeline-num-layers / "
        "--decoder-last-pipeline-num-layers place them (TransformerConfig.num_layers_in_first_pipeline_stage / "
        "num_layers_in_last_pipeline_stage); the step runs at the pace of the stage with the most work. "
    )
    out = [
        stages + "The budget for training is the full device capacity; allocator fragmentation (typically 5-10 %) is "
        "not modelled.",
        f"Precision {s.precision}: {p.description}.",
        "Model states follow ZeRO (Rajbhandari et al. 2020): stage 1 shards optimizer state and fp32 master weights, "
        "2 also gradients, 3 also parameters, over the data-parallel (x context-parallel) group; routed experts over "
        "DP / EP. FSDP/ZeRO-3 holds the gathered unit being computed (a layer or the embedding/head) plus the next, "
        "prefetched layer and one unsharded gradient unit; ZeRO-2 that gradient unit.",
        "Activations follow Korthikanti et al. 2022 (Table 2), adapted to the architecture: fused RMSNorm/LayerNorm "
        "kernels (input + fp32 statistics), SwiGLU keeps 4 tensors of the MLP width, GQA keeps K/V at the KV-head "
        "width under FlashAttention; unfused attention keeps the softmax (and dropout) of every score.",
        "Logits and loss: the unfused PyTorch cross-entropy peak, 12 B x vocabulary / TP per token of one micro-batch "
        "on the last stage (loss_kernel te: Transformer Engine's fused kernel, one 16-bit copy).",
        f"Step time: hardware FLOPs at {percent(efficiency.training_compute)} of the dense "
        f"{p.compute_dtype} peak ({efficiency.source}), stated for A100 GEMMs: x this GPU's GEMM ceiling relative to "
        "A100's (published MAMF, planner.physics.gemm_efficiency), plus a fixed 6.6 us per GEMM kernel; "
        "backward = 2 x forward; recomputation adds a forward. Norms, residual adds, rotary, the MLP activation and "
        "the loss run apart at the memory roofline, fused (each tensor read or written once per kernel; eager PyTorch "
        f"moves more: planner.training.elementwise_kernels); the efficiency is Megatron's end-to-end "
        f"{percent(TRAINING_EFFICIENCY_END_TO_END)} with those kernels' {REFERENCE_ELEMENTWISE_SHARE:.1%} share of its "
        "reference runs (Narayanan et al. 2021 Table 1) taken out. The pipeline adds "
        + (
            "the ZB-H1 bubble (p - 1)(F + B - 2W), W the weight-gradient GEMMs deferred into it (Qi et al. 2024)."
            if s.pipeline_schedule == "zb-h1"
            else "(p - 1)/(v m) of bubble."
        ),
        f"Communication at {percent(efficiency.communication)} of link bandwidth, NVLink inside a node of "
        f"{s.gpus_per_node_on(s.accelerator())} GPUs, {rate(s.inter_node_bandwidth_bytes_per_second, 'B/s')} per GPU "
        "between nodes, each GPU with its own NIC: a tensor-parallel group spanning nodes moves its data over its "
        "members' NICs together and so do data-parallel and ZeRO/FSDP collectives (NCCL rings, one per NIC), an "
        "expert all-to-all sends its off-node share over each GPU's own. "
        f"Overlap: {_tensor_parallel_overlap(s)}; expert all-to-all and pipeline sends are exposed; data-parallel gradient "
        "reduction hides behind the last micro-batch's backward; ZeRO-2/3 per-micro-batch collectives, ring-attention "
        "K/V exchange and parameter-offload fetches hide behind each micro-batch's compute; the parameter all-gather "
        "after a sharded optimizer step and optimizer-offload transfers are exposed. Compute that runs beside a "
        "collective is 18.9 % slower (the mean measured in arXiv:2507.03114), so overlap is never free.",
        "MFU counts model FLOPs with causal attention (s(s+1)/2 pairs) and no recomputation; HFU counts what the "
        "kernels execute. PaLM/Megatron count all s^2 pairs and report higher MFU at long sequences.",
        "Runtime overhead: CUDA context and workspaces 0.5 GiB, CUDA graph pools 0.25 GiB, NCCL buffers 0.25 GiB.",
    ]
    return out


def _lora_assumptions(s: TrainingScenario) -> list[str]:
    p = tprec.PRECISIONS[s.precision]
    out: list[str] = []
    if s.lora is not None:
        quant = (
            (" in 4-bit NF4 (block 64" + (", double-quantized scales" if s.lora.double_quantization else "") + ")")
            if s.lora.quantize_base
            else f" in {'fp32' if p.activation >= 4 else 'bf16'}"
        )
        out.append(
            f"LoRA rank {s.lora.rank} on {', '.join(s.lora.target_modules)}: frozen base linear layers{quant}; "
            "only adapters have gradients and optimizer state (adapters follow the precision recipe). "
            "Activations as for full training plus r per adapter, minus the frozen output head's input "
            "(an upper bound: frozen projections without adapters save no input either)."
        )
    return out


def _recipe_assumptions(s: TrainingScenario, arch: ModelArchitecture) -> list[str]:
    """MoE routing, the optimizer, fp32, recomputation and FP8, when the scenario uses them."""
    out: list[str] = []
    if arch.is_moe:
        out.append(
            "MoE: top-k routing with no dropped tokens; experts split over TP x EP; the token permutation copies "
            "(Megatron's permute, local-expert sort and their inverses) at the HBM roofline, no host syncs or launch "
            "gaps; the dispatch all-to-all crosses (EP - 1)/EP of the routed tokens"
            + (
                " (DeepEP: across nodes one copy per remote node, forwarded over NVLink)"
                if s.expert_dispatch == "deepep"
                else ""
            )
            + (
                "; dispatch and combine run under another micro-batch's compute (moe_a2a_overlap). "
                if s.overlap_expert_all_to_all
                else ", exposed. "
            )
            + (
                "Routing assumed balanced (expert_load_imbalance 1): every expert-parallel rank gets the mean share "
                "of tokens, as in force-balanced benchmarks; real routers run above it."
                if s.expert_load_imbalance == 1.0
                else f"The busiest expert-parallel rank gets {s.expert_load_imbalance:g} x the mean share of routed "
                "tokens (stated, not measured; EP > 1 only): its expert GEMMs and all-to-all set the step; MFU "
                "counts the useful work only; its larger expert activations are not added to the memory."
            )
        )
    if s.attention_kernel != "unstated":
        rate = attention_efficiency.attention_kernel_fraction(s.accelerator().id, s.attention_kernel)
        out.append(
            f"Attention ({s.attention_kernel}) at {percent(rate)} of the 16-bit peak over forward and backward, the "
            "kernel's published rate on this GPU (planner.physics.attention_efficiency)."
            if rate
            else f"Attention kernel {s.attention_kernel}: no published training rate for this GPU; attention is priced "
            "like the GEMMs at the flat training efficiency."
        )
    if s.optimizer == "adam8bit":
        out.append("8-bit Adam (bitsandbytes): two uint8 states per parameter with an fp32 absmax per 256 values.")
    if s.optimizer == "adafactor":
        out.append(
            "Adafactor: factored second moment (row + column per matrix), no first moment (torch.optim.Adafactor)."
        )
    if s.precision == "fp32":
        out.append("fp32 matmuls at the fp32 (non-tensor-core) peak; enabling TF32 would run them much faster.")
    recompute = recompute_assumption(s, arch)
    if recompute is not None:
        out.append(recompute)
    out += kernel_notes.named_kernel_assumptions(s, arch)
    return out


@dataclass(frozen=True, slots=True)
class PlanFigures:
    """The typed results of one training plan that its equations quote."""

    layout: TrainingLayout
    memory: MemoryBreakdown
    performance: TrainingPerformance
    cost: TrainingCost
    hardware: HardwareSummary
    energy: TrainingEnergy | None = None


def equations_for(
    s: TrainingScenario, arch: ModelArchitecture, counts: ParameterCounts, eff: Efficiency, figures: PlanFigures
) -> list[Equation]:
    """Each headline number's equation with the scenario's numbers filled in (DESIGN rule 7)."""
    f = figures
    return [
        *_memory_equations(s, arch, counts, f.layout, f.memory),
        *_time_equations(s, counts, eff, f.layout, f.performance, f.hardware),
        *_feature_equations(s, arch, counts),
        *_cost_equations(s, f.performance, f.cost),
        *(_energy_equations(s, f.performance, f.energy) if f.energy is not None else []),
    ]


def _energy_equations(s: TrainingScenario, perf: TrainingPerformance, e: TrainingEnergy) -> list[Equation]:
    return [
        Equation(
            name="Power per GPU",
            formula="idle + busy share x (board - idle); busy share = (step - bubble - offload) / step",
            substituted=f"{e.idle_watts:.0f} W + {e.busy_share:.2f} x ({e.board_watts:.0f} W - {e.idle_watts:.0f} W)",
            value=e.watts_per_gpu,
            unit="W",
            source="planner.physics.energy (linear idle-to-board model; board and idle power: catalog power_source)",
        ),
        Equation(
            name="Energy to train",
            formula="GPUs x W per GPU x hours x PUE / 1000",
            substituted=f"{s.num_gpus} x {e.watts_per_gpu:.0f} W x {perf.time_to_train_seconds / 3600:,.1f} h x "
            f"{e.pue:g} / 1000",
            value=e.kwh,
            unit="kWh",
        ),
    ]


def _feature_equations(s: TrainingScenario, arch: ModelArchitecture, counts: ParameterCounts) -> list[Equation]:
    """Recomputation's extra FLOPs and FP8's weight copies, when the scenario uses them."""
    out: list[Equation] = []
    recompute = RECOMPUTE_LEVEL[s.activation_checkpointing]
    if recompute:
        modules = s.recompute_module_set or ("core_attn",)
        fraction = full_recompute_fraction(
            stage_layers(arch, s.pipeline_parallel),
            s.recompute_method,
            s.recompute_num_layers,
            s.virtual_pipeline_stages,
        )
        lora_rank, lora_targets = (s.lora.rank, tuple(s.lora.target_modules)) if s.lora else (0, ())
        work = step_time.FlopsInputs(
            s.sequence_length,
            s.flash_attention,
            recompute,
            s.lora is not None,
            lora_rank,
            lora_targets,
            modules,
            fraction,
        )
        _, with_recompute = step_time.model_training_flops_per_token(counts, arch, work)
        without_work = replace(work, recompute=Recompute.NONE, recompute_modules=("core_attn",), recompute_fraction=1.0)
        _, without = step_time.model_training_flops_per_token(counts, arch, without_work)
        what = {
            Recompute.SELECTIVE: f"selective modules {', '.join(modules)}: their matmuls (+ attention forward for "
            "core_attn)",
            Recompute.FULL: f"full: {percent(float(fraction))} of the layers' forward again",
            Recompute.OP: "op: every second matmul of each layer (k, o, up/down)",
        }[recompute]
        out.append(
            Equation(
                name="Recomputation FLOPs per token",
                formula="hardware FLOPs with recomputation - without",
                substituted=f"{count(float(with_recompute))} - {count(float(without))} ({what})",
                value=float(with_recompute - without),
                unit="FLOPs",
                source="Megatron-core recompute_modules / torchtitan op SAC / Korthikanti et al. 2022",
            )
        )
    p = tprec.PRECISIONS[s.precision]
    if p.gemm_weight_copy:
        elements = float(
            tmem.stage_gemm_weight_elements(counts, arch, s.tensor_parallel, s.pipeline_parallel, s.expert_parallel)
        )
        zero3 = s.dp * s.context_parallel if s.effective_zero_stage >= 3 else 1
        out.append(
            Equation(
                name="FP8 weight copies per GPU",
                formula="FP8 copy + FP8 transpose (2 B) x layer GEMM weights per GPU (/ DP x CP with ZeRO-3)",
                substituted=f"{p.gemm_weight_copy:g} B x {count(elements)} / {zero3}",
                value=p.gemm_weight_copy * elements / zero3,
                unit="bytes",
                source="Transformer Engine (weights cast once per step, is_first_microbatch)",
            )
        )
    return out


def _memory_equations(
    s: TrainingScenario,
    arch: ModelArchitecture,
    counts: ParameterCounts,
    layout: TrainingLayout,
    memory: MemoryBreakdown,
) -> list[Equation]:
    return [*_model_state_equations(s, counts, layout, memory), *_activation_equations(s, arch, layout, memory)]


def _model_state_equations(
    s: TrainingScenario, counts: ParameterCounts, layout: TrainingLayout, memory: MemoryBreakdown
) -> list[Equation]:
    """Parameters, weights, gradients and optimizer states per GPU (ZeRO)."""
    p = tprec.PRECISIONS[s.precision]
    opt_per_elem = tprec.optimizer_state_bytes_per_element(s.optimizer, p.state)
    opt_text = "factored (Adafactor)" if opt_per_elem is None else f"{p.master:g} + {opt_per_elem:g}"
    grad_bytes = tmem.gradient_bytes_per_element(p.grad, s.grad_accumulation_fp32, s.distributed_optimizer)
    zero = s.effective_zero_stage
    group = s.dp * s.context_parallel
    return [
        Equation(
            name="Parameters",
            formula="embedding + layers x (attention + MLP/experts + norms) + lm_head",
            substituted=" + ".join(f"{k} {count(v)}" for k, v in counts.as_dict().items() if v),
            value=counts.total,
            unit="parameters",
        ),
        Equation(
            name="Trainable parameters per GPU",
            formula="stage layers / TP (experts / (TP x EP)) + embedding or head / TP"
            if s.lora is None
            else "sum over targeted projections of r x (d_in + d_out), split by TP",
            substituted=f"TP {s.tensor_parallel}, PP {s.pipeline_parallel}, EP {s.expert_parallel}"
            + (f", rank {s.lora.rank}" if s.lora else ""),
            value=layout.parameters_trainable_per_gpu,
            unit="parameters",
        ),
        Equation(
            name="Weights per GPU",
            formula="parameters per GPU x bytes / (DP x CP if ZeRO-3)",
            substituted=f"{count(layout.parameters_trainable_per_gpu)} x {p.param:g} B, ZeRO-{zero}, group {group}"
            + (" + FP8 weight copies (below)" if p.gemm_weight_copy else "")
            if s.lora is None
            else f"frozen base + adapters, ZeRO-{zero}",
            value=memory.components["weights_bytes"],
            unit="bytes",
            source="ZeRO Fig. 1",
        ),
        Equation(
            name="Gradients per GPU",
            formula="trainable per GPU x grad bytes / (DP x CP if ZeRO >= 2)",
            substituted=f"{count(layout.parameters_trainable_per_gpu)} x {grad_bytes:g} B / {group if zero >= 2 else 1}",
            value=memory.components["gradients_bytes"],
            unit="bytes",
            source="ZeRO Fig. 1; Megatron-core DDP: one grad buffer in the reduce dtype",
        ),
        Equation(
            name="Optimizer states per GPU",
            formula="trainable per GPU x (master + moments) bytes / (DP x CP if ZeRO >= 1)",
            substituted=f"{count(layout.parameters_trainable_per_gpu)} x ({opt_text}) B / "
            f"{group if zero >= 1 else 1}" + (" (offloaded to host)" if s.offload_optimizer else ""),
            value=memory.components["optimizer_states_bytes"],
            unit="bytes",
            source="ZeRO Sec. 3 (K = 12 for Adam)",
        ),
    ]


def _layer_activation_inputs(s: TrainingScenario) -> tact.ActivationInputs:
    """The scenario's activation inputs as the equations quote them (TP with sequence parallelism in effect)."""
    p = tprec.PRECISIONS[s.precision]
    return tact.ActivationInputs(
        tensor_parallel=s.tensor_parallel,
        sequence_parallel=s.sequence_parallel and s.tensor_parallel > 1,
        flash_attention=s.flash_attention,
        dropout=s.dropout,
        sequence_length=s.sequence_length,
        bytes_per_element=p.activation,
        lora_rank=s.lora.rank if s.lora else 0,
        lora_targets=tuple(s.lora.target_modules) if s.lora else (),
        recompute=RECOMPUTE_LEVEL[s.activation_checkpointing],
        recompute_modules=s.recompute_module_set or ("core_attn",),
        gemm_input_bytes_per_element=p.gemm_input_activation,
    )


def _activation_equations(
    s: TrainingScenario, arch: ModelArchitecture, layout: TrainingLayout, memory: MemoryBreakdown
) -> list[Equation]:
    """Saved activations per token per layer and per GPU, and the logits."""
    p = tprec.PRECISIONS[s.precision]
    logit_bytes = tact.loss_bytes_per_logit(s.loss_kernel, p.activation)
    moe_layer = arch.is_moe and arch.num_moe_layers >= arch.num_dense_layers
    per_token_layer = tact.layer_activation_bytes_per_token(arch, moe_layer, _layer_activation_inputs(s))
    uneven = s.stage_layer_counts()
    stage_text = (
        f"{stage_layers(arch, s.pipeline_parallel)} layers"
        if uneven is None
        else f"{uneven[0]} / {uneven[1]} / {uneven[2]} layers on the first / middle / last stage, the heaviest kept"
    )
    in_flight = float(
        tact.in_flight_microbatches(s.pipeline_parallel, layout.gradient_accumulation_steps, s.virtual_pipeline_stages)
    )
    return [
        Equation(
            name="Activations per token per layer",
            formula="norms x (h B + stats) + 2 h B + attention (q, k, v, out) + MLP (4 f B SwiGLU / 2 f B GeLU)"
            " [/TP] - what recomputation frees (selective: its modules; op: all but every other matmul output; "
            "full: all but h B)" + ("; GEMM inputs at 1 B (FP8)" if p.gemm_input_activation is not None else ""),
            substituted=f"h {arch.hidden_size}, heads {arch.num_attention_heads}, KV heads {arch.num_kv_heads}, "
            f"MLP {arch.intermediate_size or arch.expert_intermediate_size}, TP {s.tensor_parallel}, "
            f"{s.activation_checkpointing} recompute"
            + (f" ({', '.join(s.recompute_module_set)})" if s.recompute_module_set else "")
            + f", flash {s.flash_attention}",
            value=float(per_token_layer),
            unit="bytes",
            source="Korthikanti et al. 2022, Table 2 (adapted)",
        ),
        Equation(
            name="Activations per GPU",
            formula="micro-batch x s / CP x (stage layers x per-layer x in-flight micro-batches + edges "
            "+ one recomputed layer)",
            substituted=f"{s.micro_batch_size} x {s.sequence_length:,} / {s.context_parallel} x "
            f"({stage_text}, in flight {in_flight:g} on the first stage)",
            value=memory.components["activations_bytes"],
            unit="bytes",
            source="Korthikanti et al. 2022, Eq. 5",
        ),
        Equation(
            name="Logits and loss",
            formula="micro-batch x s / CP x bytes per logit x vocabulary / TP (last stage)",
            substituted=f"{s.micro_batch_size} x {s.sequence_length:,} x {logit_bytes:g} x {arch.vocab_size:,} / "
            f"{s.tensor_parallel}",
            value=memory.components["logits_bytes"],
            unit="bytes",
        ),
    ]


def _time_equations(
    s: TrainingScenario,
    counts: ParameterCounts,
    eff: Efficiency,
    layout: TrainingLayout,
    perf: TrainingPerformance,
    hardware: HardwareSummary,
) -> list[Equation]:
    t = perf.step_breakdown_seconds
    # Compute by GEMM generation and shape (training.step.microbatch_time, physics.gemm_efficiency); the kernel
    # count takes every layer of the even stage (block recomputation repeats fewer).
    accel = s.accelerator()
    ratio = gemm_efficiency.training_ceiling_ratio(accel.id, accel.gemm_dtype(hardware.compute_dtype))
    tail = gemm_efficiency.gemm_tail_seconds(accel.vendor not in ("cpu", "apple"))
    kernels = int(
        microbatch_gemm_kernels(
            stage_layers(s.architecture(), s.pipeline_parallel),
            RECOMPUTE_LEVEL[s.activation_checkpointing],
            1.0,
        )
    )
    return [
        Equation(
            name="Model FLOPs per token",
            formula="3 x (2 x active matmul parameters + causal attention)"
            if s.lora is None
            else "2 x (2 x matmul parameters) + 3 x (attention + adapters)",
            substituted=(
                f"6 x {count(counts.active)} active params"
                if s.lora is None
                else f"4 x {count(counts.active)} frozen params + 6 x {count(layout.parameters_trainable)} "
                "adapter params"
            )
            + f" + attention at s = {s.sequence_length:,}",
            value=perf.model_flops_per_token,
            unit="FLOPs",
            source="Kaplan et al. 2020 (6N); PaLM App. B",
        ),
        Equation(
            name="Micro-batch compute on one GPU",
            formula="stage hardware FLOPs / (peak x efficiency x GEMM ceiling ratio) + GEMM kernels x fixed time"
            + " + named kernels at their own rates (attention, grouped experts) + memory-bound kernels' bytes / (HBM "
            "bandwidth x memory efficiency) (FP8 casts, token copies, norms, residual adds, activations, loss)"
            + ("; layer GEMMs count peak / FP8 peak of their FLOPs" if s.precision == "fp8" else ""),
            substituted=f"{count(perf.forward_backward.flops)}FLOP / "
            f"({rate(hardware.peak_flops_per_second, 'FLOP/s')} x {eff.training_compute:g} x {ratio:.3g}) + "
            f"{kernels:,} x {seconds(tail)} + named and memory-bound kernels",
            value=perf.forward_backward.compute_seconds,
            unit="seconds",
        ),
        Equation(
            name="Step time",
            formula="(m + (p - 1)/v) x micro-batch slot + exposed DP sync + optimizer step + offload",
            substituted=f"({layout.gradient_accumulation_steps} + {s.pipeline_parallel - 1}/"
            f"{s.virtual_pipeline_stages}) x {seconds(perf.forward_backward.seconds)} + "
            f"{seconds(t['data_parallel_seconds'])} + {seconds(t['optimizer_step_seconds'])} + "
            f"{seconds(t['offload_transfer_seconds'])}",
            value=perf.step_seconds,
            unit="seconds",
            source="Narayanan et al. 2021, Sec. 2.2",
        ),
        Equation(
            name="MFU",
            formula="model FLOPs per step / (step x GPUs x peak)",
            substituted=f"{count(perf.model_flops_per_step)}FLOP / ({seconds(perf.step_seconds)} "
            f"x {s.num_gpus} x {rate(hardware.peak_flops_per_second, 'FLOP/s')})",
            value=perf.mfu,
            unit="fraction",
        ),
    ]


def _cost_equations(s: TrainingScenario, perf: TrainingPerformance, cost: TrainingCost) -> list[Equation]:
    return [
        Equation(
            name="Time to train",
            formula="training tokens / tokens per second",
            substituted=f"{count(s.training_tokens)} / {perf.tokens_per_second:,.0f}",
            value=perf.time_to_train_seconds,
            unit="seconds",
        ),
        Equation(
            name="Cost to train",
            formula="GPUs x hours x $/GPU-hour",
            substituted=f"{s.num_gpus} x {perf.time_to_train_seconds / 3600:,.1f} h x {usd(cost.usd_per_gpu_hour)}",
            value=cost.usd_total,
            unit="USD",
        ),
    ]
