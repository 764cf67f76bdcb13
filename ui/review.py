"""What a deployment review needs from a plan: verdicts in plain words, risks, and the key numbers.

Pure functions over a Plan (no Streamlit): the Review page renders them, tests check them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner import units
from planner.hardware.catalog import resolve_accelerator
from ui import bands
from ui.text import component_label, gpu_short_name, resource_label

HEADROOM_RISK = 0.10


@dataclass(frozen=True)
class Targets:
    """What the reviewer asks for; None = not set."""

    max_ttft_s: float | None = None
    max_tpot_ms: float | None = None
    max_usd_per_month: float | None = None
    max_training_usd: float | None = None
    max_training_days: float | None = None


@dataclass(frozen=True)
class Check:
    status: str  # "ok", "fail" or "unset"
    text: str

    @property
    def icon(self) -> str:
        """Streamlit markdown icon (Material Symbols ship with Streamlit; emoji fonts may be missing)."""
        return {"ok": ":green[:material/check_circle:]", "fail": ":red[:material/cancel:]"}.get(
            self.status, ":gray[:material/remove_circle_outline:]"
        )


def _scenario(plan) -> dict:
    return plan.scenario


def title(plan, number: int | None = None) -> str:
    s = _scenario(plan)
    name = s.get("label") or f"{plan.model.name} on {s['num_gpus']}× {gpu_short_name(plan.hardware.name)}"
    kind = "Inference" if plan.kind == "inference" else "Training"
    return (f"Plan {number}: " if number is not None else "") + f"{name} ({kind.lower()})"


def memory_check(plan) -> Check:
    mem = plan.memory
    if mem.fits:
        return Check(
            "ok",
            f"Fits in GPU memory with {units.percent(mem.headroom_fraction)} headroom "
            f"({units.gib(mem.total_bytes)} of {units.gib(mem.budget_bytes)} per GPU).",
        )
    return Check(
        "fail",
        f"Does not fit in GPU memory: each GPU needs {units.gib(mem.total_bytes)} but has "
        f"{units.gib(mem.budget_bytes)} to use.",
    )


def latency_check(plan, targets: Targets) -> Check | None:
    if plan.kind != "inference":
        return None
    perf = plan.performance
    ttft, tpot_ms = perf.ttft_seconds, perf.tpot_seconds * 1e3
    measured = f"first token in {units.seconds(ttft)}, then {units.seconds(perf.tpot_seconds)} per token"
    if targets.max_ttft_s is None and targets.max_tpot_ms is None:
        return Check("unset", f"No latency target set ({measured}).")
    misses = []
    if targets.max_ttft_s is not None and ttft > targets.max_ttft_s:
        misses.append(f"first token takes {units.seconds(ttft)} (target {units.seconds(targets.max_ttft_s)})")
    if targets.max_tpot_ms is not None and tpot_ms > targets.max_tpot_ms:
        misses.append(
            f"each token takes {units.seconds(perf.tpot_seconds)} (target {units.seconds(targets.max_tpot_ms / 1e3)})"
        )
    if misses:
        return Check("fail", "Misses the latency target: " + "; ".join(misses) + ".")
    wanted = []
    if targets.max_ttft_s is not None:
        wanted.append(f"first token ≤ {units.seconds(targets.max_ttft_s)}")
    if targets.max_tpot_ms is not None:
        wanted.append(f"≤ {units.seconds(targets.max_tpot_ms / 1e3)} per token")
    return Check("ok", f"Meets the latency target ({', '.join(wanted)}): {measured}.")


def budget_check(plan, targets: Targets) -> Check:
    if plan.kind == "inference":
        monthly = plan.cost.usd_per_month
        if targets.max_usd_per_month is None:
            return Check("unset", f"No monthly budget set ({units.usd(monthly)} per month).")
        if monthly <= targets.max_usd_per_month:
            return Check(
                "ok", f"Within budget: {units.usd(monthly)} per month (budget {units.usd(targets.max_usd_per_month)})."
            )
        return Check(
            "fail", f"Over budget: {units.usd(monthly)} per month (budget {units.usd(targets.max_usd_per_month)})."
        )
    total = plan.cost.usd_total
    if targets.max_training_usd is None:
        return Check("unset", f"No training budget set ({units.usd(total)} to train).")
    if total <= targets.max_training_usd:
        return Check(
            "ok", f"Within budget: {units.usd(total)} to train (budget {units.usd(targets.max_training_usd)})."
        )
    return Check("fail", f"Over budget: {units.usd(total)} to train (budget {units.usd(targets.max_training_usd)}).")


def deadline_check(plan, targets: Targets) -> Check | None:
    if plan.kind != "training":
        return None
    seconds = plan.performance.time_to_train_seconds
    if targets.max_training_days is None:
        return Check("unset", f"No deadline set (training takes {units.seconds(seconds)}).")
    if seconds <= targets.max_training_days * 86400:
        return Check(
            "ok",
            f"Meets the deadline: training takes {units.seconds(seconds)} "
            f"(deadline {targets.max_training_days:g} days).",
        )
    return Check(
        "fail",
        f"Misses the deadline: training takes {units.seconds(seconds)} (deadline {targets.max_training_days:g} days).",
    )


def checks(plan, targets: Targets) -> list[Check]:
    items = [
        memory_check(plan),
        latency_check(plan, targets),
        deadline_check(plan, targets),
        budget_check(plan, targets),
    ]
    return [c for c in items if c is not None]


def resources_sentence(plan) -> str:
    s = _scenario(plan)
    gpus = f"{s['num_gpus']} × {plan.hardware.name}"
    if plan.kind == "inference":
        line = f"Needs {gpus}: {units.usd(plan.cost.usd_per_month)} per month ({units.usd(plan.cost.usd_per_hour)} per hour)"
        if plan.cost.gpus_needed is not None:
            line += (
                f"; {plan.cost.gpus_needed} GPUs to serve the target of {s['target_requests_per_second']:g} requests/s"
            )
        return line + "."
    return (
        f"Needs {gpus} for {units.seconds(plan.performance.time_to_train_seconds)}: "
        f"{units.usd(plan.cost.usd_total)} in total ({plan.cost.gpu_hours:,.0f} GPU-hours)."
    )


def binding_sentence(plan) -> str:
    return f"Limited by {resource_label(plan.bottleneck)}. {plan.bottleneck_reason}"


def _untested_dtypes(plan) -> list[str]:
    s = _scenario(plan)
    try:
        accel = resolve_accelerator(s["gpu"])
    except Exception:  # a custom GPU that no longer validates: the plan itself says so
        return []
    out = []
    if plan.kind == "inference":
        for what, dtype in (("weights", s.get("weight_dtype")), ("KV cache", s.get("kv_cache_dtype"))):
            if (
                dtype in ("fp8", "int8", "int4")
                and not accel.supports(dtype)
                and not (dtype == "int4" and what == "weights")
            ):
                out.append(f"{what} in {dtype}")
    else:
        precision = s.get("precision", "")
        dtype = "bf16" if "bf16" in precision else "fp16" if "fp16" in precision else None
        if dtype and not accel.supports(dtype):
            out.append(f"{dtype} compute")
    return out


def risks(plan) -> list[str]:
    """The reviewer's risk list: low headroom, KV cache above the weights, untested dtypes, then the rest."""
    mem = plan.memory
    out = []
    if mem.fits and mem.headroom_fraction < HEADROOM_RISK:
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
    kv = mem.components.get("kv_cache_bytes", 0.0)
    weights = mem.components.get("weights_bytes", 0.0)
    if kv > weights > 0:
        out.append(
            f"The KV cache ({units.gib(kv)}) is larger than the weights ({units.gib(weights)}): memory use grows "
            "with concurrency and context, not with the model."
        )
    for what in _untested_dtypes(plan):
        out.append(
            f"{what} on {plan.hardware.name}: this GPU has no native support, so the format is untested here "
            "(memory is saved, speed is not)."
        )
    covered = ("Headroom is only", "KV cache (", "untested dtype", "Does not fit")
    out += [w for w in plan.warnings if not any(c in w for c in covered)]
    return out


def key_numbers(plan) -> list[tuple[str, str, str]]:
    """(label, value, likely range or '') for the review's table; ranges from plan.uncertainty (ui.bands)."""
    mem = plan.memory
    likely = bands.texts(plan)

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
            ("Time to first token", units.seconds(perf.ttft_seconds), band("Time to first token")),
            ("Time per output token", units.seconds(perf.tpot_seconds), band("Time per output token")),
            ("Output tokens/s", units.count(perf.output_tokens_per_second), band("Output tokens/s")),
            ("Requests/s", f"{perf.requests_per_second:,.2f}", ""),
            ("Max concurrency", f"{mem.max_concurrency:,}" if mem.max_concurrency is not None else "n/a", ""),
            ("$ per 1M output tokens", units.usd(cost.usd_per_million_output_tokens), band("$ per 1M output tokens")),
            ("$ per month", units.usd(cost.usd_per_month), ""),
        ]
    else:
        perf, cost = plan.performance, plan.cost
        rows += [
            ("Step time", units.seconds(perf.step_seconds), band("Step time")),
            ("Tokens/s", units.count(perf.tokens_per_second), band("Tokens/s")),
            ("MFU", units.percent(perf.mfu, 1), band("MFU")),
            ("Largest micro-batch that fits", str(mem.max_micro_batch_size or 0), ""),
            ("Time to train", units.seconds(perf.time_to_train_seconds), band("Time to train")),
            ("Cost to train", units.usd(cost.usd_total), band("Cost to train")),
        ]
    return rows


def overall(checks_: list[Check]) -> str:
    if any(c.status == "fail" for c in checks_):
        return "fail"
    if all(c.status == "ok" for c in checks_):
        return "ok"
    return "partial"


def finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
