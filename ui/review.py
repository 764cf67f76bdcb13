"""What a deployment review needs from a plan: the workload and verdicts in plain words, risks, key numbers.

Pure functions over a Plan (no Streamlit): the Review page renders them, tests check them. Verdicts come
from the engine (planner.verdict: met only when the whole likely range meets the target); this module only
adds the "no target set" lines and the plain-language wording around them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner import units
from planner.dtypes import FORMATS
from planner.hardware.catalog import resolve_accelerator
from planner.inference.workload import Traffic
from planner.results import LOW_HEADROOM_FRACTION, coded_warnings
from planner.verdict import Targets, Verdict, memory_verdict, target_verdicts
from ui import bands, traffic_text
from ui.text import component_label, gpu_short_name, resource_label

HEADROOM_RISK = LOW_HEADROOM_FRACTION  # the engine's low_headroom threshold, named in the review's sentence
IF_IT_FIT = "if it fit"
STATUS_OF_VERDICT = {"met": "ok", "at_risk": "risk", "missed": "fail"}

# What each binding resource means, for a reader who does not plan GPUs (the engine's reason, with its
# numbers and terms, goes behind the "Technical details" expander).
PLAIN_BINDING = {
    "capacity": "The plan does not fit in GPU memory; nothing else matters until it does.",
    "memory_bandwidth": "Each step has to read the model and the cached conversation from GPU memory, and "
    "that reading takes longer than the arithmetic: faster memory, fewer bytes per token (quantization) "
    "or more GPUs help; faster compute does not.",
    "compute": "The GPUs' arithmetic is the slowest part: more or faster GPUs, or less work per token, speed it up.",
    "communication": "The GPUs spend most of the time waiting on each other's data: fewer GPUs per copy of "
    "the model or faster links help more than faster GPUs.",
}


@dataclass(frozen=True)
class Check:
    status: str  # "ok", "risk", "fail" or "unset"
    text: str
    verdict: Verdict | None = None

    @property
    def icon(self) -> str:
        """Streamlit markdown icon (Material Symbols ship with Streamlit; emoji fonts may be missing)."""
        return {
            "ok": ":green[:material/check_circle:]",
            "risk": ":orange[:material/error:]",
            "fail": ":red[:material/cancel:]",
        }.get(self.status, ":gray[:material/remove_circle_outline:]")


def title(plan, number: int | None = None) -> str:
    s = plan.scenario
    name = s.label or f"{plan.model.name} on {s.num_gpus}× {gpu_short_name(plan.hardware.name)}"
    kind = "Inference" if plan.kind == "inference" else "Training"
    return (f"Plan {number}: " if number is not None else "") + f"{name} ({kind.lower()})"


def workload_sentence(plan) -> str:
    """What the plan is asked to do, in plain words: the requests (inference) or the job (training)."""
    s = plan.scenario
    gpus = f"{s.num_gpus} × {gpu_short_name(plan.hardware.name)}"
    if plan.kind == "inference":
        traffic = _traffic(plan)
        stream = (
            f" Checked against a simulated stream of {traffic_text.stream_text(traffic)}."
            if traffic is not None
            else ""
        )
        return (
            f"Serves {plan.model.name} on {gpus} to {s.concurrency:,} conversations at once "
            f"(sequences in flight), each with a {s.prompt_tokens:,}-token prompt and a "
            f"{s.output_tokens:,}-token answer; weights in {s.weight_dtype}, cached conversation in "
            f"{s.kv_cache_dtype}.{stream}"
        )
    lay, perf = plan.layout, plan.performance
    lora = getattr(s, "lora", None)
    job = ("QLoRA" if lora.quantize_base else "LoRA") + f" fine-tuning (rank {lora.rank})" if lora else "full training"
    return (
        f"Trains {plan.model.name} on {gpus} ({job}): {units.count(perf.training_tokens)} tokens in batches of "
        f"{lay.global_batch_size:,} sequences × {lay.sequence_length:,} tokens "
        f"({units.count(lay.tokens_per_step)} tokens per step, {perf.steps_to_train:,.0f} steps)."
    )


def verdict_check(v: Verdict) -> Check:
    return Check(STATUS_OF_VERDICT[v.status], v.sentence, v)


def memory_check(plan) -> Check:
    return verdict_check(memory_verdict(plan))


def _unset(plan, targets: Targets) -> list[Check]:
    """The targets of this plan's kind that are not set: the number, without a verdict."""
    out = []
    if plan.kind == "inference":
        perf = plan.performance
        stream = _traffic(plan)
        stream_slo = getattr(plan, "traffic", None) is not None and stream is not None and stream.slo is not None
        if (
            targets.max_ttft_seconds is None
            and targets.max_tpot_seconds is None
            and not (stream_slo and stream.slo.targets)
        ):
            out.append(
                Check(
                    "unset",
                    f"No latency target set (first token in {units.seconds(perf.ttft_seconds)}, then "
                    f"{units.seconds(perf.tpot_seconds)} per token).",
                )
            )
        if targets.max_usd_per_month is None:
            out.append(Check("unset", f"No monthly budget set ({units.usd(plan.cost.usd_per_month)} per month)."))
        return out
    if targets.max_training_usd is None:
        out.append(Check("unset", f"No training budget set ({units.usd(plan.cost.usd_total)} to train)."))
    if targets.max_training_seconds is None:
        out.append(
            Check("unset", f"No deadline set (training takes {units.seconds(plan.performance.time_to_train_seconds)}).")
        )
    return out


# Verdicts that hold whether or not the plan fits (renting the GPUs costs the same either way).
FIT_INDEPENDENT = ("cost.usd_per_month",)


def checks(plan, targets: Targets) -> list[Check]:
    """Memory first, then every target of this plan's kind: a verdict when set, the bare number when not.

    When the plan does not fit, its speed (and a training job's time and cost) are hypothetical: those
    verdicts are marked 'if it fit' and count as no verdict, so nothing shows green next to a plan that
    cannot run."""
    out = [memory_check(plan)]
    for v in target_verdicts(plan, targets):
        if plan.memory.fits or v.path in FIT_INDEPENDENT:
            out.append(verdict_check(v))
        else:
            out.append(Check("unset", f"({IF_IT_FIT}) {v.sentence}", v))
    return out + traffic_checks(plan) + _unset(plan, targets)


def _traffic(plan) -> Traffic | None:
    data = getattr(plan.scenario, "traffic", None)
    return Traffic.model_validate(data) if data else None


def traffic_checks(plan) -> list[Check]:
    """The request stream's SLO, target by target (met / missed under the simulated stream), and the share of
    requests that met every target. The simulation caps the batch by the KV blocks that fit, so these hold
    even when the static concurrency does not fit; a stream that was not simulated is a risk (its warning)."""
    result, traffic = getattr(plan, "traffic", None), _traffic(plan)
    if result is None or traffic is None:
        return []
    return [Check(status, text) for status, text in traffic_text.review_lines(result, traffic) if text]


def resources_sentence(plan) -> str:
    s = plan.scenario
    gpus = f"{s.num_gpus} × {plan.hardware.name}"
    fits = plan.memory.fits
    if plan.kind == "inference":
        money = f"{units.usd(plan.cost.usd_per_month)} per month ({units.usd(plan.cost.usd_per_hour)} per hour)"
        line = f"Needs {gpus}: {money}" if fits else f"{gpus} cost {money}, but the plan does not fit on them"
        if plan.cost.gpus_needed is not None and fits:
            line += f"; {plan.cost.gpus_needed} GPUs to serve the target of {s.target_requests_per_second:g} requests/s"
        return line + "."
    if not fits:
        return (
            f"Does not fit on {gpus}: if it fit, training would take "
            f"{units.seconds(plan.performance.time_to_train_seconds)} and cost {units.usd(plan.cost.usd_total)}."
        )
    return (
        f"Needs {gpus} for {units.seconds(plan.performance.time_to_train_seconds)}: "
        f"{units.usd(plan.cost.usd_total)} in total ({plan.cost.gpu_hours:,.0f} GPU-hours)."
    )


def binding_sentence(plan) -> str:
    """The binding resource in plain words (the engine's technical reason: `binding_details`)."""
    return f"Limited by {resource_label(plan.bottleneck)}. " + PLAIN_BINDING.get(plan.bottleneck, "")


def binding_details(plan) -> str:
    return plan.bottleneck_reason


def _untested_dtypes(plan) -> list[str]:
    s = plan.scenario
    try:
        accel = resolve_accelerator(s.gpu)
    except Exception:  # a custom GPU that no longer validates: the plan itself says so
        return []
    out = []
    if plan.kind == "inference":
        for what, dtype in (
            ("weights", getattr(s, "weight_dtype", None)),
            ("KV cache", getattr(s, "kv_cache_dtype", None)),
        ):
            if dtype in FORMATS and accel.dequantizes(dtype):  # the plan's own rule (its precision warning)
                out.append(f"{what} in {dtype}")
    else:
        precision = getattr(s, "precision", "")
        dtype = "bf16" if "bf16" in precision else "fp16" if "fp16" in precision else None
        if dtype and not accel.supports(dtype):
            out.append(f"{dtype} compute")
    return out


# The engine's warnings the review words itself, or that its memory verdict already says (filtered by code).
REWORDED = ("low_headroom", "kv_exceeds_weights", "does_not_fit")


def risks(plan) -> list[str]:
    """The reviewer's risk list: low headroom, a likely memory range past the budget, KV cache above the
    weights, untested dtypes, then the engine's other warnings. Low headroom and the KV cache follow the engine's
    own warnings (by code), in plainer words; the memory range is the plan's uncertainty band."""
    mem = plan.memory
    warned = {w.code for w in coded_warnings(plan)}
    out = []
    if "low_headroom" in warned:
        out.append(
            f"Headroom is only {units.percent(mem.headroom_fraction)} (under {units.percent(HEADROOM_RISK)}): "
            "a longer input or a burst of traffic can run out of memory."
        )
    band = bands.band_of(plan, "memory.total_bytes")
    if mem.fits and band is not None and band.high > mem.budget_bytes:
        out.append(
            f"The likely memory range reaches {units.gib(band.high)} per GPU, past the {units.gib(mem.budget_bytes)} "
            f"available ({band.basis}): measure before committing."
        )
    if "kv_exceeds_weights" in warned:
        kv, weights = mem.components["kv_cache_bytes"], mem.components["weights_bytes"]
        out.append(
            f"The KV cache ({units.gib(kv)}) is larger than the weights ({units.gib(weights)}): memory use grows "
            "with concurrency and context, not with the model."
        )
    for what in _untested_dtypes(plan):
        out.append(
            f"{what} on {plan.hardware.name}: this GPU has no native support, so the format is untested here "
            "(memory is saved, speed is not)."
        )
    return out + [w.message for w in coded_warnings(plan) if w.code not in REWORDED]


def traffic_rows(plan) -> list[tuple[str, str, str]]:
    """The simulated stream's numbers for the review's table, each with its likely measured range: the p99 of every
    SLO target (or p99 TTFT and TPOT without one), then the completed rate — the numbers the traffic lines judge."""
    result = getattr(plan, "traffic", None)
    if result is None:
        return []
    rows = []
    checks = {c.metric: c for c in result.slo}
    for metric, label in (("ttft_seconds", "TTFT"), ("tpot_seconds", "TPOT"), ("e2e_latency_seconds", "End-to-end")):
        check = checks.get(metric)
        if check is None and (metric == "e2e_latency_seconds" or checks):
            continue
        percentile = check.percentile if check is not None else 99
        dist = getattr(result, metric)
        rows.append(
            (
                f"Stream p{percentile} {label}",
                units.seconds(dist.at(percentile)),
                traffic_text.seconds_range(dist.likely_at(percentile)),
            )
        )
    rows.append(
        (
            "Stream requests completed",
            units.per_second(result.request_throughput_per_second),
            traffic_text.rate_range(result.request_throughput_likely),
        )
    )
    return rows


def key_numbers(plan) -> list[tuple[str, str, str]]:
    """(label, value, likely range or '') for the review's table; ranges from plan.uncertainty (ui.bands).

    A plan that does not fit has no speed or cost: those values are marked 'if it fit'."""
    mem = plan.memory
    likely = bands.texts(plan)
    caveat = "" if mem.fits else f" ({IF_IT_FIT})"

    def band(label: str) -> str:
        text = likely.get(label)
        return text.removeprefix("likely ") if text else ""

    rows = [
        ("Memory per GPU", f"{units.gib(mem.total_bytes)} of {units.gib(mem.budget_bytes)}", band("Memory per GPU")),
        (
            "Largest memory component",
            f"{component_label(mem.dominant_component)} {units.gib(mem.components[mem.dominant_component])}",
            "",
        ),
    ]
    if plan.kind == "inference":
        perf, cost = plan.performance, plan.cost
        rows += [
            ("Max concurrency", f"{mem.max_concurrency:,}" if mem.max_concurrency is not None else "n/a", ""),
            ("Time to first token", units.seconds(perf.ttft_seconds) + caveat, band("Time to first token")),
            ("Time per output token", units.seconds(perf.tpot_seconds) + caveat, band("Time per output token")),
            ("Output tokens/s", units.count(perf.output_tokens_per_second) + caveat, band("Output tokens/s")),
            ("Requests/s", f"{perf.requests_per_second:,.2f}" + caveat, ""),
            (
                "$ per 1M output tokens",
                units.usd(cost.usd_per_million_output_tokens) + caveat,
                band("$ per 1M output tokens"),
            ),
            ("$ per month", units.usd(cost.usd_per_month), ""),
        ]
        rows += traffic_rows(plan)
    else:
        perf, cost = plan.performance, plan.cost
        rows += [
            ("Largest micro-batch that fits", str(mem.max_micro_batch_size or 0), ""),
            ("Step time", units.seconds(perf.step_seconds) + caveat, band("Step time")),
            ("Tokens/s", units.count(perf.tokens_per_second) + caveat, band("Tokens/s")),
            ("MFU", units.percent(perf.mfu, 1) + caveat, band("MFU")),
            ("Time to train", units.seconds(perf.time_to_train_seconds) + caveat, band("Time to train")),
            ("Cost to train", units.usd(cost.usd_total) + caveat, band("Cost to train")),
        ]
    return rows


def overall(checks_: list[Check]) -> str:
    """The worst of the checks: any fail fails; any risk is a risk; all ok is ok; otherwise partial."""
    if any(c.status == "fail" for c in checks_):
        return "fail"
    if any(c.status == "risk" for c in checks_):
        return "risk"
    if all(c.status == "ok" for c in checks_):
        return "ok"
    return "partial"


def finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
