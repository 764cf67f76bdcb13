"""Speculative decoding in the Inference page's results: the round, what it yields, and whether it pays.

Reads ``plan.performance.speculative`` (planner.inference.results.SpeculativeSummary) and nothing else; the
equations behind each number are the plan's ("Verify step (...)", "Decode time per token (speculative)").
"""

from __future__ import annotations

import streamlit as st

from planner import units
from planner.inference.draft import ACCEPTANCE_SOURCE_LABELS, METHOD_TITLES
from ui.text import equation_help, md_escape


def speedup_text(speedup: float) -> str:
    return f"{speedup:.2f}×"


def acceptance_text(summary) -> str:
    """'0.85 (assumed: DeepSeek-V3 report)' or '0.72 (yours)'."""
    if summary.acceptance_is_assumed:
        return f"{summary.acceptance_rate:g} (assumed: {ACCEPTANCE_SOURCE_LABELS[summary.method]})"
    return f"{summary.acceptance_rate:g} (yours)"


def verify_equation(plan) -> str | None:
    return next((e.name for e in plan.equations if e.name.startswith("Verify step")), None)


def speculative_summary(plan) -> None:
    """Four numbers beside the decode metrics and a line on acceptance; nothing without speculative decoding."""
    spec = getattr(plan.performance, "speculative", None)
    if spec is None:
        return
    k = spec.drafted_tokens
    with st.container(border=True, key="inference_speculative_summary"):
        st.markdown(
            f"**Speculative decoding** ({METHOD_TITLES.get(spec.method, spec.method)}) · draft: "
            f"{md_escape(spec.draft)} · k = {k} drafted tokens per round"
        )
        cols = st.columns(4)
        cols[0].metric(
            "Tokens per round",
            f"{spec.tokens_per_round:.2f}",
            help=f"Per sequence and verify step: the accepted prefix of the {k} drafted tokens plus the model's "
            f"own, (1 - a^(k+1)) / (1 - a) with a = {spec.acceptance_rate:g} (Leviathan et al. 2023, Eq. 1); at "
            f"most {k + 1}.",
        )
        cols[1].metric(
            "Speedup vs plain decode",
            speedup_text(spec.speedup),
            help=equation_help(
                plan,
                "Decode time per token (speculative)",
                note=f"Plain decode step {units.seconds(spec.plain_decode_step_seconds)} divided by the round "
                f"({units.seconds(spec.round_seconds)}) over its {spec.tokens_per_round:.2f} tokens. Below 1× "
                "speculation slows decode: the verify step is compute-bound at this batch.",
            ),
        )
        verify = verify_equation(plan)
        cols[2].metric(
            "Verify step",
            units.seconds(spec.verify_step_seconds),
            help=equation_help(
                plan,
                *([verify] if verify else []),
                note=f"The model over {k + 1} tokens per sequence; {spec.verify.binding.replace('_', ' ')}-bound.",
            ),
        )
        cols[3].metric(
            "Draft step",
            units.seconds(spec.draft_step_seconds),
            help=f"One of the {k} draft steps of a round ({units.seconds(k * spec.draft_step_seconds)} in all). "
            f"The draft's pass over a prompt adds {units.seconds(spec.draft_prefill_seconds)} to TTFT.",
        )
        if spec.acceptance_is_assumed:
            acceptance = (
                f"Acceptance per drafted token: **{spec.acceptance_rate:g} (assumed)**: "
                f"{md_escape(spec.acceptance_source)}. It depends on the workload: measure it (vLLM logs the "
                "draft acceptance rate) and type it in the sidebar."
            )
        else:
            acceptance = f"Acceptance per drafted token: **{spec.acceptance_rate:g}** (your value)."
        st.caption(
            acceptance + f" Round {units.seconds(spec.round_seconds)} = verify + {k} × draft; plain decode step "
            f"{units.seconds(spec.plain_decode_step_seconds)}."
        )
