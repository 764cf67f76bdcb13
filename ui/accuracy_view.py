"""How accurate is this? Headroom's predictions against published measurements (benchmarks/accuracy/).

Reads the report that ``benchmarks/accuracy.py --sensitivity`` writes (report.csv: one row per case;
report.md: the same plus the sensitivity table) and the per-family summary the engine's error bands use
(planner/accuracy.json through planner.uncertainty). Nothing is recomputed here except sorting.
"""

from __future__ import annotations

import re
import zlib
from functools import lru_cache
from pathlib import Path

import altair as alt
import pandas as pd
import streamlit as st

from planner import units
from planner.uncertainty import (
    REGIME_MIN_SOURCES,
    SUMMARY_FILE,
    band,
    coverage_notes,
    coverage_text,
    family_errors,
    regime_range_usable,
    serving_errors,
)
from ui import palette
from ui.charts import _finish, _records, _spec
from ui.render import chart, md_escape

ROOT = Path(__file__).resolve().parents[1]
REPORT_CSV = ROOT / "benchmarks" / "accuracy" / "report.csv"
REPORT_MD = ROOT / "benchmarks" / "accuracy" / "report.md"
REGENERATE = ".venv/bin/python benchmarks/accuracy.py --sensitivity"

SERVING = "serving"  # the traffic simulator against published serving runs: a band in the report, on no plan number
FAMILIES = {  # family -> (name, what was compared, which dashboard numbers take its band)
    "memory": ("Memory", "bytes of weights and of the KV-cache pool (vLLM paper, OPT on A100)", "memory per GPU"),
    "decode_speed": (
        "Decode speed",
        "batch-1 output tokens/s (NVIDIA TensorRT-LLM, GPT-J on A100/H100)",
        "time per output token and output tokens/s of plans serving one sequence per replica",
    ),
    "ttft": (
        "Time to first token",
        "first-token latency, one prompt or a burst (TensorRT-LLM, GPT-J)",
        "time to first token",
    ),
    "max_throughput": (
        "Max throughput",
        "output tokens/s at full load (TensorRT-LLM, Llama 3.1 8B on H100/H200)",
        "output tokens/s, time per output token (sequences / tokens/s) and $ per 1M tokens of plans serving "
        "more than one sequence per replica",
    ),
    "training_step": (
        "Training step",
        "achieved TFLOP/s per GPU (Megatron-LM 2021, 1.7B–1T GPT; DeepSpeed ZeRO-3 rows not mapped)",
        "the step-time range of a training plan only where the corpus families below are missing",
    ),
    "training_dense": (
        "Training, dense (corpus)",
        "tokens/s per GPU of published dense training runs of 8 publishers (benchmarks/accuracy/training_reference.csv)",
        "step time, tokens/s, MFU, time and cost to train of dense models",
    ),
    "training_moe": (
        "Training, MoE (corpus)",
        "tokens/s per GPU of published MoE training runs (Megatron-Bridge, Together AI)",
        "step time, tokens/s, MFU, time and cost to train of mixture-of-experts models",
    ),
    SERVING: (
        "Serving (simulated)",
        "TTFT, TPOT and throughput of published vLLM / NIM serving runs replayed through the traffic simulator",
        "no plan number yet (the band is wide: shown here only)",
    ),
}

# Likely causes of the largest errors (judgement from the case's setup; see report.md for the readings).
FLOOD = (
    "A flood of short requests sent at once: the measured server admits and streams them far slower than its GPU "
    "serves them (per-request CPU work in the API server), which the simulator does not model (report.md: "
    "short-request floods)."
)
CASE_CAUSES = {
    "T082": "A batch-1 decode step of a 6B model in fp8 on TensorRT-LLM v0.5 lasts ~5 ms where its weight reads take "
    "~2 ms: kernel launches, sampling and fp8 scaling kernels of that early release, which the per-step costs "
    "(measured on vLLM V1) do not cover.",
    "T082-ttft": "One 128-token prompt on an idle GPU: a few ms of fixed per-request cost (scheduling, tokenization, "
    "launches, first sampling) that a roofline of the prefill FLOPs does not contain.",
    "T084-ttft": "As T082-ttft: fixed per-request overhead dominates a tiny prompt.",
    "M009": "vLLM's profiled activation peak and runtime buffers on 4 GPUs are larger than Headroom's overhead "
    "allowance, so less memory is left for the KV pool.",
    "T148": "ZeRO-3 without model parallelism: parameter all-gathers overlap with compute less than Headroom assumes.",
    "T143": "A 35-stage pipeline: the paper's schedule hides more of the bubble and communication than the "
    "(p − 1)/m bubble model, so Headroom under-predicts the achieved rate.",
    "T144": "A 64-stage pipeline: as T143, the measured run hides more bubble and communication than modelled.",
    "S117": FLOOD + " DeepSeek-R1's tiny-batch MoE decode on 8 GPUs is also slower than its fused-MoE rates say.",
    "S118": FLOOD + " DeepSeek-R1's tiny-batch MoE decode on 8 GPUs is also slower than its fused-MoE rates say.",
    "S091": "TPOT of 4-token outputs under a flood: the simulator admits the flood into full 16k-token prompt steps, "
    "so each request's decode tokens ride prefill steps; in the measured run the first tokens all arrive at the "
    "end and decodes run in steps of their own (the front end's admission rate, not modelled).",
    "S092": "As S091: decode tokens ride the flood's prefill steps in the simulation, not in the measured run.",
    "S002": "500 requests at once: the front end admits about 95 requests/s, so the engine never batches the "
    "500 prompts the simulator pushes into its first steps (TTFT far too low, TPOT too high).",
    "S005": "As S002: the simulator's first steps carry prompts the real front end had not admitted yet.",
    "S030": FLOOD,
    "S031": FLOOD,
}
FAMILY_CAUSES = {
    "memory": "allocator and runtime reserve differ from the documented overhead",
    "decode_speed": "fixed per-step overheads (launches, sampling) that the roofline does not contain",
    "ttft": "fixed per-request overhead, or a prefill efficiency other than the default",
    "max_throughput": "the engine's scheduler or kernels at that batch and context differ from the kernel-group "
    "roofline",
    "training_step": "communication overlap and the pipeline schedule differ from the model's",
    "serving": "work the simulator does not model: the API server's per-request CPU time (floods, light load), "
    "MLA decode attention and block-scaled FP8 experts (DeepSeek-R1); report.md splits the errors by regime",
}


@lru_cache(maxsize=4)
def _report(path: str, modified: float) -> pd.DataFrame:
    frame = pd.read_csv(path)
    frame["abs_error_percent"] = frame["error_percent"].abs()
    return frame


def report() -> pd.DataFrame | None:
    try:
        return _report(str(REPORT_CSV), REPORT_CSV.stat().st_mtime)
    except (OSError, ValueError, KeyError):
        return None


def report_sections() -> dict[str, str]:
    """report.md split at its '## ' headings: title -> Markdown body."""
    try:
        text = REPORT_MD.read_text()
    except OSError:
        return {}
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1].strip() for i in range(1, len(parts) - 1, 2)}


def family_name(family: str) -> str:
    return FAMILIES.get(family, (family.replace("_", " ").capitalize(),))[0]


def promise_text(stats: dict) -> str:
    """'80% band; held 82% of 22 cases when each was left out', plus its notes (too few cases, widened)."""
    return coverage_text(stats) if stats.get("band") else ""


def summary_frame() -> pd.DataFrame:
    """Per family: cases, median and p90 |error|, bias, the band every prediction of that family gets, and
    how often that band held the measured value when each case was left out. Last, the serving family (the
    traffic simulator): its band is reported, flagged wide, and carried by no plan number."""
    rows = []
    families = list(family_errors().items())
    serving = serving_errors()
    for family, stats in families + ([(SERVING, serving)] if serving else []):
        edges = stats.get("band")
        if family == SERVING and edges:
            # P / (1 + e_hi) .. P / (1 + e_lo), as planner.uncertainty.band does, for a family no plan reads.
            low, high = 1 / (1 + edges["high_error"]), 1 / (1 + edges["low_error"])
        else:
            b = band(1.0, family)
            low, high = b.low, b.high
        name = family_name(family)
        rows.append(
            {
                "Family": name,
                "Cases": int(stats["cases"]),
                "Median |error|": units.percent(stats["median_abs_error"], 1),
                "p90 |error|": units.percent(stats["p90_abs_error"], 1),
                "Median signed error": f"{stats['median_signed_error'] * 100:+.1f}%",
                "Band on a prediction": f"{(low - 1) * 100:+.0f}% … {(high - 1) * 100:+.0f}%"
                + (" (wide; on no plan number)" if family == SERVING else ""),
                "Promised": f"{edges['promised_coverage']:.0%}" if edges else "",
                "Held when left out": (
                    f"{edges['loo_held']} of {edges['loo_cases']} ({edges['loo_coverage']:.0%})" if edges else ""
                ),
                "Note": "; ".join(coverage_notes(edges)) if edges else "",
            }
        )
    return pd.DataFrame(rows)


def cause(case: str, family: str) -> str:
    if case in CASE_CAUSES:
        return CASE_CAUSES[case]
    text = FAMILY_CAUSES.get(family, "see report.md")
    return f"{text[:1].upper()}{text[1:]}."


def worst_frame(frame: pd.DataFrame, n: int = 8) -> pd.DataFrame:
    worst = frame.sort_values("abs_error_percent", ascending=False).head(n)
    return pd.DataFrame(
        {
            "Case": worst["case"],
            "Family": [family_name(f) for f in worst["family"]],
            "What": worst["description"],
            "Measured": [f"{r:.4g} {u}" for r, u in zip(worst["reference"], worst["unit"])],
            "Predicted": [f"{p:.4g}" for p in worst["predicted"]],
            "Error": [f"{e:+.1f}%" for e in worst["error_percent"]],
            "Likely cause": [cause(c, f) for c, f in zip(worst["case"], worst["family"])],
        }
    )


@lru_cache(maxsize=1)
def _distribution_chart() -> dict:
    y = alt.Y("name:N", title=None, sort=alt.EncodingSortField("order"), axis=alt.Axis(labelLimit=200))
    x = alt.X("error_percent:Q", title="error: (predicted − measured) / measured, %")
    bands_ = (
        alt.Chart(_records("bands"))
        .mark_bar(height=22, color=palette.SKY, opacity=0.35)
        .encode(
            x=alt.X("p10:Q", title="error: (predicted − measured) / measured, %"),
            x2="p90:Q",
            y=y,
            tooltip=[alt.Tooltip("name:N", title="Family"), alt.Tooltip("range:N", title="Band (signed error)")],
        )
    )
    zero = (
        alt.Chart(_records("zero"))
        .mark_rule(color=palette.BLACK)
        .encode(x=alt.X("x:Q", title="error: (predicted − measured) / measured, %"))
    )
    dots = (
        alt.Chart(_records("cases"))
        .mark_point(size=70, filled=True, opacity=0.85)
        .encode(
            x=x,
            y=y,
            yOffset=alt.YOffset("jitter:Q", scale=alt.Scale(domain=[-1, 1], range=[6, 22])),
            color=alt.Color(
                "direction:N",
                title=None,
                scale=alt.Scale(domain=["over-predicts", "under-predicts"], range=[palette.VERMILLION, palette.BLUE]),
                legend=alt.Legend(orient="top", direction="horizontal"),
            ),
            tooltip=[
                alt.Tooltip("case:N", title="Case"),
                alt.Tooltip("description:N", title="What"),
                alt.Tooltip("measured:N", title="Measured"),
                alt.Tooltip("predicted_text:N", title="Predicted"),
                alt.Tooltip("error_text:N", title="Error"),
            ],
        )
    )
    medians = (
        alt.Chart(_records("bands"))
        .mark_tick(color=palette.BLACK, thickness=2, size=26)
        .encode(
            x=alt.X("median:Q", title="error: (predicted − measured) / measured, %"),
            y=y,
            tooltip=[alt.Tooltip("name:N", title="Family"), alt.Tooltip("median_text:N", title="Median error")],
        )
    )
    return _finish(alt.layer(bands_, zero, dots, medians), height=300).to_dict()


def _edge(stats: dict, key: str, fallback: str) -> float:
    return stats["band"][key] if stats.get("band") else stats[fallback]


def distribution_chart(frame: pd.DataFrame) -> dict:
    """Every case's signed error as a dot, per family; shaded: the band's edges (signed errors); black tick:
    the median."""
    order = {f: i for i, f in enumerate(FAMILIES)}
    cases = frame.copy()
    cases["name"] = [family_name(f) for f in cases["family"]]
    cases["order"] = [order.get(f, 99) for f in cases["family"]]
    cases["direction"] = ["over-predicts" if e > 0 else "under-predicts" for e in cases["error_percent"]]
    cases["jitter"] = [((zlib.crc32(str(c).encode()) % 200) / 100.0) - 1.0 for c in cases["case"]]
    cases["measured"] = [f"{r:.4g} {u}" for r, u in zip(cases["reference"], cases["unit"])]
    cases["predicted_text"] = [f"{p:.4g}" for p in cases["predicted"]]
    cases["error_text"] = [f"{e:+.1f}%" for e in cases["error_percent"]]
    stats = dict(family_errors())
    if serving_errors() and (cases["family"] == SERVING).any():
        stats[SERVING] = serving_errors()
    bands_ = pd.DataFrame(
        [
            {
                "name": family_name(f),
                "order": order.get(f, 99),
                "p10": _edge(s, "low_error", "p10_signed_error") * 100,
                "p90": _edge(s, "high_error", "p90_signed_error") * 100,
                "median": s["median_signed_error"] * 100,
                "median_text": f"{s['median_signed_error'] * 100:+.1f}%",
                "range": f"{_edge(s, 'low_error', 'p10_signed_error') * 100:+.0f}% to "
                f"{_edge(s, 'high_error', 'p90_signed_error') * 100:+.0f}% ({promise_text(s)})",
            }
            for f, s in stats.items()
        ]
    )
    columns = [
        "case",
        "description",
        "name",
        "order",
        "direction",
        "jitter",
        "measured",
        "predicted_text",
        "error_text",
        "error_percent",
    ]
    return _spec(
        _distribution_chart(),
        {"cases": cases[columns], "bands": bands_, "zero": pd.DataFrame({"x": [0.0]})},
        height=max(220, 64 * len(bands_) + 60),
    )


def accuracy_section(calibration=None) -> None:
    """The whole "How accurate is this?" body (its own page; the Calibrate page links to it)."""
    frame = report()
    if frame is None or frame.empty:
        st.warning(f"No accuracy report found at {REPORT_CSV.relative_to(ROOT)}. Generate it:", icon=":material/info:")
        st.code(REGENERATE, language="bash")
        return
    stats = family_errors()
    corpus = [s["cases"] for s in stats.values() if s.get("generated_by") == "benchmarks/training_accuracy.py"]
    corpus_text = f", and against **{sum(corpus)} published training runs** of other publishers in {len(corpus)} more"
    st.markdown(
        f"Headroom was checked against **{len(frame)} published measurements** in {frame['family'].nunique()} "
        f"families{corpus_text if corpus else ''}, "
        "with the documented default efficiencies (no calibration). Every headline number on the Inference, "
        "Training and Review pages carries a *likely* range from this spread, an **80% band**: built from all "
        "the cases of its family, and checked by leaving each case out (build the band from the others, see "
        "whether the left-out measurement falls inside). *Held when left out* below is that check."
    )
    if calibration is not None:
        st.info(
            f"The active calibration **{md_escape(calibration.label)}** replaces these published spreads with its "
            "own residual error in every plan's band.",
            icon=":material/straighten:",
        )
    _family_errors(frame, stats)
    _traffic_ranges()
    _decisions()
    _largest_errors(frame)
    _regenerate()


def traffic_ranges_frame() -> pd.DataFrame:
    """The likely ranges traffic answers carry, per metric kind and regime, with their out-of-source check."""
    rows = []
    for kind, entry in serving_errors().get("ranges", {}).items():
        for regime, st_ in [("every regime", entry["all"]), *entry["regimes"].items()]:
            b = st_["band"]
            used = regime == "every regime" or regime_range_usable(st_)
            rows.append(
                {
                    "Kind": {"ttft": "TTFT", "tpot": "TPOT / ITL", "throughput": "Throughput"}.get(kind, kind),
                    "Regime": regime,
                    "Statistics": st_["cases"],
                    "Sources": st_["sources"],
                    "Band (signed error)": f"{100 * b['low_error']:+.0f}% … {100 * b['high_error']:+.0f}%",
                    "Held with its source left out": (
                        f"{100 * b['loo_coverage']:.0f}% of {b['loo_cases']}"
                        if st_["sources"] > 1
                        else "n/a: one source"
                    ),
                    "Plans use it": "yes" if used else "no (too few sources)",
                }
            )
    return pd.DataFrame(rows)


def _traffic_ranges() -> None:
    """How the likely ranges on traffic answers are made, and how often they held out of source."""
    frame = traffic_ranges_frame()
    if frame.empty:
        return
    st.subheader("Likely ranges on traffic answers", anchor=False)
    st.markdown(
        "Every simulated latency, rate, SLO verdict and replica count carries the range of its metric kind: "
        "the 80% band of the traffic simulator's signed errors on published serving runs, its deployment "
        f"regime's own where runs from at least {REGIME_MIN_SOURCES} sources measured it, else every regime's. "
        "Each is checked **out of source**: every statistic against the band built without its whole source "
        "(a plan's deployment is one no source measured); where that held fewer than 80 %, the edges were widened "
        "until it did. A target inside the range reads *at risk*."
    )
    st.table(frame.set_index(["Kind", "Regime"]))


DECISION_METRICS = {
    "p99_ttft_ms": "p99 TTFT",
    "mean_ttft_ms": "mean TTFT",
    "median_ttft_ms": "median TTFT",
    "p99_tpot_ms": "p99 TPOT",
    "mean_tpot_ms": "mean TPOT",
    "median_itl_ms": "median ITL",
}


def _decision_ms(value: float) -> str:
    return f"{value / 1e3:.3g} s" if value >= 1e3 else f"{value:.3g} ms"


def _decision_share(value) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"


def _decision_signed(value) -> str:
    return "n/a" if value is None else f"{100 * value:+.0f}%"


def decisions() -> dict:
    """The decisions the published sweeps measured, as Headroom makes them (accuracy.json serving -> decisions)."""
    return serving_errors().get("decisions") or {}


def decisions_frame(source: str) -> pd.DataFrame:
    """One source's decisions: per sweep and SLO rule, the largest load meeting the SLO measured and by Headroom,
    how far apart, the likely decisions and the replicas for the target rate."""
    rows = []
    for sweep in decisions().get("sweeps", []):
        if sweep["source"] != source:
            continue
        ttft, tpot = DECISION_METRICS[sweep["ttft_statistic"]], DECISION_METRICS[sweep["tpot_statistic"]]
        for d in sweep["decisions"]:
            likely = d["replicas_likely"]
            rows.append(
                {
                    "Sweep": f"{sweep['deployment']}, {sweep['kind']} ({', '.join(sweep['loads'])})",
                    "SLO": f"{ttft} ≤ {_decision_ms(d['targets_ms']['ttft'])}, {tpot} ≤ "
                    f"{_decision_ms(d['targets_ms']['tpot'])} ({d['rule']})",
                    "Measured decision": d["measured_load"],
                    "Headroom decision": d["headroom_load"],
                    "Match": d["category"] + (f" ({d['steps']:+d})" if d["steps"] else ""),
                    "Likely decisions": f"{d['likely_loads'][0]} … {d['likely_loads'][1]}"
                    + ("" if d["measured_within_likely"] else " (misses the measured)"),
                    "Replicas: measured / Headroom (likely)": (
                        f"{d['replicas_measured'] or 'none'} / {d['replicas_headroom'] or 'none'}"
                        + (f" ({likely[0]}–{likely[1]})" if likely else "")
                        + f" for {d['target_requests_per_second']:.3g} req/s"
                    ),
                    "Replica error": _decision_signed(d["replica_error"]),
                }
            )
    return pd.DataFrame(rows)


def decisions_summary_frame() -> pd.DataFrame:
    """Per source, per rule and pooled: exact / one step off / further, the replica error, and the likely ones."""
    found = decisions()
    rows = [
        *[(source, p) for source, p in found.get("sources", {}).items()],
        *[(f"Rule '{rule}', every source", p) for rule, p in found.get("rules_pooled", {}).items()],
        *([("Pooled", found["pooled"])] if found.get("pooled") else []),
    ]
    return pd.DataFrame(
        [
            {
                "Source": name,
                "Decisions": p["decisions"],
                "Exact": p["exact"],
                "One step off": p["one_step_off"],
                "Further": p["further"],
                "Chance: exact / within one": f"{_decision_share(p['chance_exact'])} / "
                f"{_decision_share(p['chance_within_one_step'])}",
                "Median |replica error|": _decision_share(p["median_abs_replica_error"]),
                "Median signed replica error": _decision_signed(p["median_signed_replica_error"]),
                "Measured decision in the likely": f"{p['measured_within_likely']} of {p['decisions']}",
                "Measured replicas in the likely": f"{p['measured_replicas_within_likely']} of {p['replicas_checked']}",
            }
            for name, p in rows
        ]
    )


def decisions_headline() -> str:
    """The pooled decision score in one sentence, with its range over sources left out."""
    found = decisions()
    p, loso = found["pooled"], found["pooled_source_left_out"]

    def spread(figure: str, fmt=_decision_share) -> str:
        return f"{fmt(loso[figure]['min'])}–{fmt(loso[figure]['max'])}"

    return (
        f"Over **{p['decisions']} decisions** from {len(found['sweeps'])} sweeps of {len(found['sources'])} sources, "
        f"Headroom's is the measured one in **{p['exact']}**, one sweep point off in **{p['one_step_off']}** and "
        f"further in **{p['further']}** (a uniform guess: {_decision_share(p['chance_exact'])} exact, "
        f"{_decision_share(p['chance_within_one_step'])} within one). Replicas for the target rate: median "
        f"|error| **{_decision_share(p['median_abs_replica_error'])}**, median signed "
        f"**{_decision_signed(p['median_signed_replica_error'])}** (negative: fewer replicas than the measurements "
        f"need). With each source left out: exact {spread('share_exact')}, within one step "
        f"{spread('share_within_one_step')}, median |replica error| {spread('median_abs_replica_error')}."
    )


def _decisions() -> None:
    """Decisions checked against measurements: per source, the load meeting an SLO and the replicas it implies."""
    found = decisions()
    if not found.get("sweeps"):
        return
    st.subheader("Decisions checked against measurements", anchor=False)
    rules = "; ".join(f"*{name}*: {text}" for name, text in found["rules"].items())
    st.markdown(
        "Where a source ran one deployment at several request rates or client concurrencies, the sweep measured a "
        "decision: the largest of its loads that meets an SLO, and the replicas a target rate then needs. Headroom "
        "makes the same decision from its simulated statistics at the same loads. SLO rules, fixed beforehand and "
        f"the same for every sweep: {rules}; on {found['statistic_rule']}. Replicas: {found['target_rule']}. "
        f"*Likely decisions*: from the largest load whose likely range 'meets' to the largest not said to 'miss', "
        "with the ranges rebuilt without the sweep's own source."
    )
    st.markdown(decisions_headline())
    for source in found["sources"]:
        st.markdown(f"**{md_escape(source)}**")
        st.table(decisions_frame(source).set_index("Sweep"))
    st.table(decisions_summary_frame().set_index("Source"))
    if found.get("not_checked"):
        with st.expander(f"Sweeps not checked ({len(found['not_checked'])})"):
            st.markdown("\n".join(f"- {md_escape(i['group'])}: {md_escape(i['reason'])}" for i in found["not_checked"]))


def _family_errors(frame, stats) -> None:
    """Each family's error table, what it compares and drives, its promise, and the distribution chart."""
    st.subheader("Error per family", anchor=False)
    st.table(summary_frame().set_index("Family"))
    st.markdown(
        "\n".join(
            f"- **{name}**: {compared}; its band is shown on {drives}."
            for family, (name, compared, drives) in FAMILIES.items()
            if family in stats or (family == SERVING and serving_errors())
        )
    )
    st.markdown(
        "\n".join(
            f"- **{family_name(family)}**: {promise_text(s)}."
            for family, s in [*stats.items(), *([(SERVING, serving_errors())] if serving_errors() else [])]
            if s.get("band")
        )
    )
    st.caption(
        "Signed error = (predicted − measured) / measured: positive means Headroom over-predicts (too "
        "optimistic for a speed, too pessimistic for a time). *Band on a prediction*: the range "
        "[P / (1 + e_hi), P / (1 + e_lo)] the dashboard shows around a prediction P, where e_lo … e_hi are "
        "signed errors of the family's cases: with 9 or more cases the ⌊0.1 (n + 1)⌋-th smallest and the "
        "⌈0.9 (n + 1)⌉-th smallest (conformal ranks); with 4–8, ± the ⌈0.8 (n + 1)⌉-th smallest |error|; "
        "with fewer, at least ±50 %. Where leaving cases out held fewer than promised, the edges move out "
        "until it holds; with fewer than 5 cases the check cannot test the promise and says so."
    )
    st.markdown("**Distribution** (one dot per case; shaded: the 80% band's edges; tick: median)")
    chart(distribution_chart(frame), width="stretch")


def _largest_errors(frame) -> None:
    """The worst cases with their likely causes, the report's own sections and every case."""
    st.subheader("The largest errors and their likely causes", anchor=False)
    worst = worst_frame(frame)
    st.markdown(
        "\n".join(
            f"- **{md_escape(r['Case'])}** · {md_escape(r['Family'])} · **{md_escape(r['Error'])}** — "
            f"{md_escape(r['What'])}: measured {md_escape(r['Measured'])}, predicted {md_escape(r['Predicted'])}.  \n"
            f"  *Likely cause:* {md_escape(r['Likely cause'])}"
            for _, r in worst.iterrows()
        )
    )
    sections = report_sections()
    sensitivity = next((body for title, body in sections.items() if title.startswith("Sensitivity")), None)
    if sensitivity:
        with st.expander("Sensitivity: how the median error moves when one default efficiency moves"):
            st.markdown(sensitivity)
    mechanisms = next((body for title, body in sections.items() if title.startswith("What each mechanism")), None)
    if mechanisms:
        with st.expander("What each accuracy mechanism buys: the median error with one switched off"):
            st.markdown(mechanisms)
    readings = sections.get("Readings chosen where a source is ambiguous")
    if readings:
        with st.expander("Readings chosen where a source is ambiguous"):
            st.markdown(readings)
    with st.expander(f"Every case ({len(frame)})"):
        st.dataframe(frame.drop(columns=["abs_error_percent"]), hide_index=True, width="stretch", key="accuracy_cases")


def _regenerate() -> None:
    """How to regenerate the report."""
    st.subheader("Regenerate the report", anchor=False)
    st.markdown(
        "After changing a formula or a default efficiency, re-run the comparison: it rewrites "
        f"`{REPORT_CSV.relative_to(ROOT)}`, `{REPORT_MD.relative_to(ROOT)}` and "
        f"`{SUMMARY_FILE.relative_to(ROOT)}` (the bands). This page re-reads the report on its next run; the bands "
        "on the other pages change when the server restarts."
    )
    st.code(REGENERATE, language="bash")
    st.caption(
        "Your own hardware: a calibration on the Calibrate page measures this machine and replaces both the "
        "efficiencies and these bands with its own residual error."
    )
