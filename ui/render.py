"""Rendering a plan: verdict, metrics with their equations, binding resource, charts, assumptions.

Every number shown comes from the Plan object; formatting goes through planner.units (via ui.text).
"""

from __future__ import annotations

import re
from typing import Any, Sequence
from urllib.parse import urlencode

import streamlit as st

from planner import units
from planner.export import plans_to_csv
from planner.share import scenario_to_query_params
from ui import charts, state
from ui.text import component_label, fmt, gpu_short_name, resource_label

HEADROOM_RISK = 0.10


# --------------------------------------------------------------------------------------- helpers


def chart(spec: dict, **kwargs) -> None:
    """Draw a compiled chart from ui.charts (Vega-Lite built with Altair; data attached per run)."""
    st.vega_lite_chart(spec=spec, **kwargs)


def md_escape(text: str) -> str:
    """Escape Markdown (and Streamlit's $…$ LaTeX) in engine text; intraword underscores stay as they are."""
    return re.sub(r"([\\`*{}\[\]<>#|~$])", r"\\\1", str(text))


def equation(plan, name: str):
    for eq in getattr(plan, "equations", []) or []:
        if eq.name == name:
            return eq
    return None


def equation_help(plan, *names: str, note: str = "") -> str:
    """Markdown for a metric's help tooltip: each named equation with the numbers filled in."""
    parts = []
    for name in names:
        eq = equation(plan, name)
        if eq is None:
            continue
        parts.append(f"**{md_escape(eq.name)}** = {md_escape(eq.formula)}\n\n"
                     f"= {md_escape(eq.substituted)}\n\n= **{md_escape(fmt(eq.value, eq.unit))}**")
    if note:
        parts.append(note)
    return "\n\n---\n\n".join(parts) or None


def plan_title(plan) -> str:
    scenario = plan.scenario
    if scenario.get("label"):
        return scenario["label"]
    return f"{plan.model.name} · {scenario['num_gpus']}× {gpu_short_name(plan.hardware.name)}"


def link_warnings(warnings: Sequence[str]) -> None:
    if warnings:
        st.warning("**This link had problems; the plan below uses defaults for them.**\n\n"
                   + "\n".join(f"- {md_escape(w)}" for w in warnings), icon=":material/link_off:")


def plan_warnings(plan) -> None:
    if plan.warnings:
        st.warning("\n".join(f"- {md_escape(w)}" for w in plan.warnings), icon=":material/warning:")


def assumptions(plan, expanded: bool = False) -> None:
    with st.expander(f"Assumptions this estimate rests on ({len(plan.assumptions)})", expanded=expanded):
        st.markdown("\n".join(f"- {md_escape(a)}" for a in plan.assumptions))
        if plan.calibration:
            st.caption(f"Calibration: {plan.calibration}")
        else:
            st.caption("No calibration: documented default efficiencies (see the Calibrate page).")


def equations(plan, expanded: bool = False) -> None:
    with st.expander(f"How each number is computed ({len(plan.equations)} equations)", expanded=expanded):
        for eq in plan.equations:
            st.markdown(f"**{md_escape(eq.name)} = {md_escape(fmt(eq.value, eq.unit))}**")
            st.code(f"{eq.formula}\n= {eq.substituted}", language=None, wrap_lines=True)
            if eq.source:
                st.caption(f"Source: {eq.source}")


# ------------------------------------------------------------------------------------- share bar


def share_link(page: str, params: dict[str, Any]) -> str:
    base = st.context.url or f"http://localhost:8501/{page}"
    base = base.split("?", 1)[0].rstrip("/")
    if not base.endswith("/" + page):
        base = re.sub(r"/[^/]*$", "", base) if base.count("/") > 2 else base
        base = f"{base}/{page}"
    query = urlencode(params, doseq=True)
    return base + (f"?{query}" if query else "")


def share_bar(page: str, params: dict[str, Any], plans: Sequence, file_stem: str,
              scenario=None, key: str | None = None) -> None:
    """Copy share link · Download CSV · Pin for Compare (when a scenario is given)."""
    key = key or page
    cols = st.columns([1, 1, 1, 2] if scenario is not None else [1, 1, 3])
    with cols[0].popover("Copy share link", icon=":material/link:", width="stretch"):
        st.caption("Anyone who opens this link sees exactly this plan. Click the copy icon of the box.")
        st.code(share_link(page, params), language=None, wrap_lines=True)
    if plans:
        cols[1].download_button(
            "Download CSV", data=plans_to_csv(plans), file_name=f"{file_stem}.csv", mime="text/csv",
            key=f"{key}_action_csv", on_click="ignore", icon=":material/download:", width="stretch",
            help="One row per plan: every input, every output (units in the column names) and the decision text. "
                 "Import it on Compare to restore the plans exactly.",
        )
    if scenario is not None:
        if cols[2].button("Pin for Compare", key=f"{key}_action_pin", icon=":material/push_pin:", width="stretch",
                          help="Keep this plan to compare it with others and review it later."):
            added, _ = state.add_pins([scenario], "session")
            st.toast("Pinned for Compare." if added else "This exact plan is already pinned.",
                     icon=":material/push_pin:")


def _scenario_of(plan):
    return state.scenario_class(plan.kind).model_validate(plan.scenario)


def scenario_params(scenario) -> dict[str, str]:
    return scenario_to_query_params(scenario, f"{scenario.kind}_")


# ------------------------------------------------------------------------------------- inference


def verdict_sentence(plan) -> tuple[bool, str]:
    mem = plan.memory
    if mem.fits:
        return True, (f"**Fits.** Each GPU needs {units.gib(mem.total_bytes)} of the {units.gib(mem.budget_bytes)} "
                      f"the engine may use — **{units.percent(mem.headroom_fraction)} headroom** "
                      f"({units.gib(mem.headroom_bytes)} free per GPU).")
    return False, (f"**Does not fit.** Each GPU needs {units.gib(mem.total_bytes)} but the engine may use "
                   f"{units.gib(mem.budget_bytes)} — {units.gib(-mem.headroom_bytes)} short per GPU.")


def verdict(plan) -> None:
    ok, text = verdict_sentence(plan)
    (st.success if ok else st.error)(text, icon=":material/check_circle:" if ok else ":material/cancel:")


def binding(plan) -> None:
    st.info(f"**Binding resource: {resource_label(plan.bottleneck)}.** {md_escape(plan.bottleneck_reason)}",
            icon=":material/speed:")


def inference_header(plan) -> None:
    s = plan.scenario
    layout = f"TP {s['tensor_parallel']}"
    if s["pipeline_parallel"] > 1:
        layout += f" · PP {s['pipeline_parallel']}"
    if s.get("expert_parallel", 1) > 1:
        layout += f" · EP {s['expert_parallel']}"
    replicas = s["num_gpus"] // (s["tensor_parallel"] * s["pipeline_parallel"])
    st.caption(
        f"**{md_escape(plan.model.name)}** ({units.count(plan.model.params_total)} parameters"
        + (f", {units.count(plan.model.params_active)} active" if plan.model.params_active != plan.model.params_total
           else "")
        + f") on **{s['num_gpus']} × {md_escape(plan.hardware.name)}** · {layout} · {replicas} "
        f"replica{'s' if replicas != 1 else ''} · weights {s['weight_dtype']}, KV cache {s['kv_cache_dtype']} · "
        f"{s['prompt_tokens']:,} prompt + {s['output_tokens']:,} output tokens × {s['concurrency']:,} in flight"
    )


def inference_metrics(plan) -> None:
    perf, cost, mem = plan.performance, plan.cost, plan.memory
    s = plan.scenario
    row1 = st.columns(3)
    row1[0].metric("Time to first token", units.seconds(perf.ttft_seconds),
                   help=equation_help(plan, "TTFT", note="An idle replica: queueing is not modelled."))
    row1[1].metric("Time per output token", units.seconds(perf.tpot_seconds),
                   help=equation_help(plan, "TPOT", "Decode step"))
    row1[2].metric("Output tokens/s", f"{units.count(perf.output_tokens_per_second)}",
                   help=equation_help(plan, "Output tokens/s",
                                      note=f"{units.count(perf.output_tokens_per_second_per_gpu)} per GPU, "
                                           f"{perf.requests_per_second:,.2f} requests/s."))
    row2 = st.columns(3)
    row2[0].metric("$ per 1M output tokens", units.usd(cost.usd_per_million_output_tokens),
                   help=equation_help(plan, "$ per 1M output tokens",
                                      note=f"{units.usd(cost.usd_per_hour)}/hour, {units.usd(cost.usd_per_month)}"
                                           f"/month at {units.usd(cost.usd_per_gpu_hour)} per GPU-hour"
                                           + (" (catalog reference price)." if plan.hardware.usd_per_gpu_hour_is_reference
                                              else " (your price).")))
    context = s["prompt_tokens"] + s["output_tokens"]
    row2[1].metric("Max concurrency", f"{mem.max_concurrency:,}" if mem.max_concurrency is not None else "n/a",
                   help=f"Most sequences of {context:,} tokens whose KV cache fits in the memory left per GPU after "
                        f"weights, activations and overhead, over all replicas ({mem.kv_blocks or 0:,} KV blocks "
                        f"of {s['kv_block_tokens']} tokens per GPU).")
    row2[2].metric("Max context", units.count(mem.max_context_tokens) + " tokens"
                   if mem.max_context_tokens is not None else "n/a",
                   help=f"Longest context each of the {s['concurrency']:,} sequences could hold with the same memory "
                        f"(capped at the model's {plan.model.max_context_tokens:,} tokens).")
    if plan.cost.gpus_needed is not None:
        st.caption(f"To serve {s['target_requests_per_second']:g} requests/s: **{plan.cost.gpus_needed} GPUs** "
                   f"({plan.cost.replicas_needed} replicas of {s['tensor_parallel'] * s['pipeline_parallel']}).")


def memory_chart(plan, budget_label: str = "engine budget") -> None:
    mem = plan.memory
    st.markdown("**Memory per GPU**")
    eq_names = [e.name for e in plan.equations if e.unit == "bytes" and "per GPU" in e.name]
    parts = " · ".join(f"{component_label(k)} {units.gib(v)}" for k, v in mem.components.items() if v > 0)
    limits = f"solid line: capacity {units.gib(mem.capacity_bytes)}"
    if abs(mem.budget_bytes - mem.capacity_bytes) > 1:
        limits = f"dashed line: {budget_label} {units.gib(mem.budget_bytes)}; " + limits
    st.caption(f"{parts} · total {units.gib(mem.total_bytes)} ({limits})",
               help=equation_help(plan, *eq_names) if eq_names else None)
    chart(charts.memory_bar(mem.components, mem.budget_bytes, mem.capacity_bytes, budget_label),
                    width="stretch")


def roofline_chart(plan) -> None:
    perf, hw = plan.performance, plan.hardware
    st.markdown("**Roofline: where prefill and decode sit on this GPU**")
    st.caption(f"{hw.compute_dtype} peak {units.rate(hw.peak_flops_per_second, 'FLOP/s')}, HBM "
               f"{units.rate(hw.memory_bandwidth_bytes_per_second, 'B/s')}; points at their achieved rate per GPU "
               "(below the roof by the efficiency factors and communication).")
    phases = [dict(phase=p.phase, flops=p.flops, bytes=p.bytes, seconds=p.seconds, binding=p.binding)
              for p in (perf.prefill, perf.decode)]
    chart(charts.roofline(hw.peak_flops_per_second, hw.memory_bandwidth_bytes_per_second, phases),
                    width="stretch")


EXPLORE_CURVE = "Latency vs throughput"
EXPLORE_GRID = "Concurrency × context"


@st.fragment
def explore(scenario, plan) -> None:
    """The sweeps: each view is many plans, so it only runs when chosen, and reruns alone."""
    st.markdown("#### Explore this scenario")
    view = st.segmented_control(
        "Sweep", [EXPLORE_CURVE, EXPLORE_GRID], default=EXPLORE_CURVE, key="inference_view_explore",
        label_visibility="collapsed",
        help="Each view re-plans this scenario many times; pick one at a time. Hover for numbers.")
    if view == EXPLORE_CURVE:
        frame = state.concurrency_sweep(scenario, plan.memory.max_concurrency)
        if frame.empty:
            st.info("No concurrency level gives a valid plan.")
            return
        st.caption("Each point is the full plan at that concurrency: more sequences in flight raise throughput "
                   "and time per token until memory runs out (✕).")
        chart(charts.latency_curve(frame, scenario.concurrency), width="stretch")
    elif view == EXPLORE_GRID:
        frame = state.context_grid(scenario, plan.memory.max_concurrency, plan.model.max_context_tokens)
        if frame.empty:
            st.info("No (concurrency, context) pair gives a valid plan.")
            return
        st.caption("Colour: output tokens/s where the plan fits in memory; grey ✕: does not fit. The outlined cell "
                   f"is this plan. Output stays {scenario.output_tokens:,} tokens; the prompt takes the rest.")
        chart(charts.heatmap(frame, (scenario.concurrency, scenario.prompt_tokens + scenario.output_tokens)),
                        width="stretch")
    else:
        st.caption("Pick a view above.")


def inference_page(scenario, plan) -> None:
    inference_header(plan)
    verdict(plan)
    share_bar("inference", scenario_params(scenario), [plan], "headroom-inference-plan", scenario=scenario)
    inference_metrics(plan)
    binding(plan)
    plan_warnings(plan)
    left, right = st.columns(2, gap="large")
    with left:
        memory_chart(plan)
    with right:
        roofline_chart(plan)
    explore(scenario, plan)
    equations(plan)
    assumptions(plan)


# -------------------------------------------------------------------------------------- training


def training_header(plan) -> None:
    lay, s = plan.layout, plan.scenario
    parts = [f"TP {lay.tensor_parallel}", f"PP {lay.pipeline_parallel}", f"DP {lay.data_parallel}"]
    if lay.context_parallel > 1:
        parts.append(f"CP {lay.context_parallel}")
    if lay.expert_parallel > 1:
        parts.append(f"EP {lay.expert_parallel}")
    lora = s.get("lora")
    job = ("QLoRA" if lora and lora.get("quantize_base") else "LoRA") + f" rank {lora['rank']}" if lora else "full training"
    st.caption(
        f"**{md_escape(plan.model.name)}** ({units.count(plan.model.params_total)} parameters, "
        f"{units.count(lay.parameters_trainable)} trainable, {job}) on **{s['num_gpus']} × "
        f"{md_escape(plan.hardware.name)}** · {' · '.join(parts)} · ZeRO {lay.zero_stage} · {s['precision']} · "
        f"{s['optimizer']} · batch {lay.global_batch_size:,} × {lay.sequence_length:,} tokens "
        f"(micro-batch {lay.micro_batch_size}, {lay.gradient_accumulation_steps} accumulation steps)"
    )


def training_verdict(plan) -> None:
    mem = plan.memory
    if mem.fits:
        st.success(f"**Fits.** Each GPU needs {units.gib(mem.total_bytes)} of its {units.gib(mem.budget_bytes)} — "
                   f"**{units.percent(mem.headroom_fraction)} headroom** ({units.gib(mem.headroom_bytes)} free). "
                   f"Largest micro-batch that fits: **{mem.max_micro_batch_size or 0}**.",
                   icon=":material/check_circle:")
    else:
        fits = mem.max_micro_batch_size
        hint = (f" A micro-batch of {fits} would fit." if fits else " Not even a micro-batch of 1 fits: shard more "
                "(ZeRO, TP/PP), recompute activations or offload.")
        st.error(f"**Does not fit.** Each GPU needs {units.gib(mem.total_bytes)} but has "
                 f"{units.gib(mem.budget_bytes)} — {units.gib(-mem.headroom_bytes)} short.{hint}",
                 icon=":material/cancel:")


def training_metrics(plan) -> None:
    perf, cost, mem = plan.performance, plan.cost, plan.memory
    row1 = st.columns(3)
    row1[0].metric("Step time", units.seconds(perf.step_seconds), help=equation_help(plan, "Step time"))
    row1[1].metric("Tokens/s", units.count(perf.tokens_per_second),
                   help=f"Whole job; {units.count(perf.tokens_per_second_per_gpu)} per GPU.")
    row1[2].metric("MFU", units.percent(perf.mfu, 1), help=equation_help(plan, "MFU", note=f"HFU {units.percent(perf.hfu, 1)}."))
    row2 = st.columns(3)
    row2[0].metric("Time to train", units.seconds(perf.time_to_train_seconds),
                   help=equation_help(plan, "Time to train",
                                      note=f"{units.count(perf.training_tokens)} tokens, {perf.steps_to_train:,.0f} steps."))
    row2[1].metric("Cost to train", units.usd(cost.usd_total),
                   help=equation_help(plan, "Cost to train",
                                      note=f"{cost.gpu_hours:,.0f} GPU-hours at {units.usd(cost.usd_per_gpu_hour)}; "
                                           f"{units.usd(cost.usd_per_million_tokens)} per 1M tokens."))
    row2[2].metric("Largest micro-batch that fits", f"{mem.max_micro_batch_size or 0}",
                   help="Largest micro-batch whose memory fits on every GPU with this layout and these savers.")


def step_chart(plan) -> None:
    perf = plan.performance
    st.markdown("**Where a step's time goes**")
    breakdown = getattr(perf, "step_breakdown_seconds", None) or getattr(perf, "time_breakdown", {})
    parts = {k: v for k, v in breakdown.items() if v > 0}
    st.caption(" · ".join(f"{component_label(k)} {units.seconds(v)}" for k, v in parts.items())
               + f" · bubble {units.percent(perf.pipeline_bubble_fraction)}",
               help=equation_help(plan, "Micro-batch compute on one GPU", "Step time"))
    chart(charts.stacked_time(parts, "Seconds per optimizer step"), width="stretch")


def micro_batch_table(plan) -> None:
    import pandas as pd

    rows = [{
        "Micro-batch": o.micro_batch_size,
        "Accumulation steps": o.gradient_accumulation_steps,
        "Memory per GPU": units.gib(o.total_bytes),
        "Activations": units.gib(o.activations_bytes),
        "Fits": "yes" if o.fits else "no",
        "Step time": units.seconds(o.step_seconds),
        "Tokens/s": units.count(o.tokens_per_second),
        "Bubble": units.percent(o.pipeline_bubble_fraction),
    } for o in plan.micro_batch_options]
    if rows:
        st.markdown("**Micro-batch vs gradient accumulation** (same global batch)")
        st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


def training_page(scenario, plan) -> None:
    training_header(plan)
    training_verdict(plan)
    share_bar("training", scenario_params(scenario), [plan], "headroom-training-plan", scenario=scenario)
    training_metrics(plan)
    binding(plan)
    plan_warnings(plan)
    left, right = st.columns(2, gap="large")
    with left:
        memory_chart(plan, budget_label="capacity")
    with right:
        step_chart(plan)
    micro_batch_table(plan)
    equations(plan)
    assumptions(plan)


# ------------------------------------------------------------------------------ trade-offs, calibrate


def tradeoffs_preview(kind: str, plan) -> None:
    """Until the technique explorer lands: what binds and what dominates memory, for the current plan."""
    st.info("**The technique explorer is coming here:** what each technique (quantization, KV-cache precision, "
            "parallelism, batching, recomputation, offload, LoRA…) buys and costs for this exact plan, and the best "
            "configuration under your constraints. Until then, this page shows where the current plan is "
            "constrained.", icon=":material/construction:")
    title = plan_title(plan)
    st.markdown(f"##### Current {kind} plan: {md_escape(title)}")
    (inference_header if plan.kind == "inference" else training_header)(plan)
    mem = plan.memory
    dominant = mem.dominant_component
    left, right = st.columns(2)
    left.metric("Binding resource", resource_label(plan.bottleneck).capitalize(),
                help=md_escape(plan.bottleneck_reason))
    right.metric("Largest memory component", component_label(dominant),
                 f"{units.percent(mem.components[dominant] / mem.total_bytes)} of {units.gib(mem.total_bytes)} per GPU",
                 delta_color="off", delta_arrow="off", help="Shrink this first to make room.")
    binding(plan)
    verdict(plan) if plan.kind == "inference" else training_verdict(plan)
    share_bar("tradeoffs", scenario_params(_scenario_of(plan)), [plan], f"headroom-{plan.kind}-plan", key="tradeoffs")
    memory_chart(plan, budget_label="engine budget" if plan.kind == "inference" else "capacity")
    plan_warnings(plan)
    assumptions(plan)


def efficiency_table(efficiency) -> None:
    import pandas as pd

    meaning = {
        "prefill_compute": "Prefill GEMMs: share of the dense peak FLOP/s reached",
        "decode_compute": "Decode GEMMs: share of the dense peak FLOP/s reached",
        "memory_bandwidth": "HBM traffic: share of the peak bandwidth reached",
        "communication": "Collectives (NCCL): share of the link bandwidth reached",
        "training_compute": "Training forward/backward: share of the dense peak FLOP/s (≈ MFU before comms)",
        "host_link": "Host link (offload): share of the PCIe/C2C bandwidth reached",
        "layer_overhead_seconds": "Fixed per-layer kernel launch overhead",
    }
    rows = []
    for name, field in type(efficiency).model_fields.items():
        if name == "source":
            continue
        value = getattr(efficiency, name)
        shown = units.seconds(value) if name.endswith("_seconds") else units.percent(value)
        rows.append({"Factor": name, "Value": shown, "What it scales": meaning.get(name, field.description or "")})
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    st.caption(f"Source: {efficiency.source}. Every plan on this dashboard uses these until a calibration is applied.")


def calibrate_page(scenario) -> None:
    import importlib.util

    from planner.performance import DEFAULT_EFFICIENCY

    plan = state.cached_plan(scenario)
    st.info("**Measured vs predicted is coming here:** run a short profile on your GPU, see each prediction next to "
            "the measurement, and apply the fitted efficiencies to every plan. Until then, this page shows the "
            "efficiency factors every plan uses.", icon=":material/construction:")
    st.markdown("##### Enable profiling")
    st.markdown("Profiling needs PyTorch, an optional extra (the dashboard itself runs without it):")
    st.code('pip install "headroom[profile]"', language="bash")
    has_torch = importlib.util.find_spec("torch") is not None
    if has_torch:
        st.success("PyTorch is installed here: profiling is available (`python -m planner --help` lists the "
                   "calibrate command once it ships).", icon=":material/check_circle:")
    else:
        st.warning("PyTorch is not installed on this server, so no profile can run here yet.",
                   icon=":material/info:")
    st.markdown("##### Efficiency defaults in use")
    efficiency_table(DEFAULT_EFFICIENCY)
    st.markdown("##### What a profile will check for the current inference plan")
    perf = plan.performance
    cols = st.columns(3)
    cols[0].metric("Predicted decode step", units.seconds(perf.decode_step_seconds),
                   help=equation_help(plan, "Decode step"))
    cols[1].metric("Predicted time to first token", units.seconds(perf.ttft_seconds), help=equation_help(plan, "TTFT"))
    cols[2].metric("Calibration applied", plan.calibration or "none (defaults)")
    inference_header(plan)
    render_link = scenario_params(scenario)
    share_bar("calibrate", render_link, [plan], "headroom-inference-plan", key="calibrate")
