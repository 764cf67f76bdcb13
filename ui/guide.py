"""Guiding inputs: when one change makes a dependent input impossible, adjust that input and say so.

Pure functions over the form's field values (scenario units, keyed by field name), no Streamlit:
``ui.controls`` writes the adjusted values into the widgets before they are drawn and shows the notes.
Only what is arithmetic on the inputs themselves is adjusted:

* the layout and the GPU count: GPUs must be a multiple of TP x PP (training: x CP, or equal to
  TP x PP x CP x DP when DP is given). When the GPU count moved, the layout shrinks to the largest one that
  divides it (each degree to one of its own divisors, so a TP that divided the heads still does); when the
  user moved the layout, the GPU count moves to the nearest multiple instead;
* expert parallelism, when the layout change broke it (inference: EP divides TP or is a multiple of it
  dividing a stage's GPUs; training: EP divides DP);
* the training global batch, to the nearest multiple of micro-batch x DP (gradient accumulation needs
  whole micro-batches).

What needs the model (TP against the attention heads, PP against the layers) stays a validation error.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from planner.inference.scenario import InferenceScenario
from planner.training.scenario import TrainingScenario
from ui.specs import field_facts

LAYOUT: dict[str, tuple[str, ...]] = {
    "inference": ("tensor_parallel", "pipeline_parallel"),
    "training": ("tensor_parallel", "pipeline_parallel", "context_parallel"),
}
_CLASSES: dict[str, type] = {"inference": InferenceScenario, "training": TrainingScenario}


@dataclass(frozen=True)
class Adjustment:
    """One input changed by the guide: its field, the value before and after, and the sentence to show."""

    name: str
    before: Any
    after: Any
    note: str


def guide(
    kind: str, values: Mapping[str, Any], changed: set[str], labels: Mapping[str, str]
) -> tuple[dict[str, Any], list[Adjustment]]:
    """The values with impossible dependent inputs adjusted, and what was adjusted (in the order applied).

    `changed`: the fields the user changed since the last run (empty when unknown); `labels`: each field's
    label as the user sees it, for the notes.
    """
    out = dict(values)
    if not all(name in out for name in ("num_gpus", *LAYOUT[kind])):
        return out, []
    steps = [_fit_layout(kind, out, changed, labels)]
    if kind == "inference":
        steps.append(_fit_inference_experts(out, changed, labels))
    else:
        steps.append(_fit_training_experts(out, changed, labels))
        steps.append(_fit_global_batch(out, labels))
    return out, [adjustment for step in steps for adjustment in step]


def _upper(kind: str, name: str) -> int:
    _, hi = field_facts(_CLASSES[kind], name).widget_range()
    if hi is None:
        raise ValueError(f"{name} has no upper bound")
    return int(hi)


def _model_parallel(kind: str, values: Mapping[str, Any]) -> int:
    return math.prod(int(values[name]) for name in LAYOUT[kind])


def _data_parallel(kind: str, values: Mapping[str, Any]) -> int | None:
    """DP as the scenario derives it: given, or GPUs / (TP x PP x CP) when that divides."""
    if kind != "training":
        return None
    if values.get("data_parallel") is not None:
        return int(values["data_parallel"])
    model_parallel = _model_parallel(kind, values)
    return values["num_gpus"] // model_parallel if values["num_gpus"] % model_parallel == 0 else None


def _layout_fits(kind: str, values: Mapping[str, Any]) -> bool:
    model_parallel = _model_parallel(kind, values)
    if kind == "training" and values.get("data_parallel") is not None:
        return model_parallel * int(values["data_parallel"]) == values["num_gpus"]
    return values["num_gpus"] % model_parallel == 0


def _product_text(kind: str, labels: Mapping[str, str], with_dp: bool = False) -> str:
    names = LAYOUT[kind] + (("data_parallel",) if with_dp else ())
    return " × ".join(labels.get(name, name) for name in names)


def _set(values: dict[str, Any], name: str, after: Any, note: str) -> Adjustment:
    before = values[name]
    values[name] = after
    return Adjustment(name, before, after, note)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _fit_layout(kind: str, values: dict[str, Any], changed: set[str], labels: Mapping[str, str]) -> list[Adjustment]:
    if _layout_fits(kind, values):
        return []
    out: list[Adjustment] = []
    gpus = labels.get("num_gpus", "num_gpus")
    layout_moved = bool(changed & {*LAYOUT[kind], "data_parallel"}) and "num_gpus" not in changed
    dp = values.get("data_parallel") if kind == "training" else None
    if dp is not None:
        wanted = _model_parallel(kind, values) * int(dp)
        if layout_moved and wanted <= _upper(kind, "num_gpus"):
            note = (
                f"{gpus} set from {values['num_gpus']:,} to {wanted:,} = "
                f"{_product_text(kind, labels, with_dp=True)}, the layout you chose."
            )
            return [_set(values, "num_gpus", wanted, note)]
        note = (
            f"{labels.get('data_parallel', 'data_parallel')} cleared (automatic: {gpus} / "
            f"({_product_text(kind, labels)})) to fit {values['num_gpus']:,} GPUs."
        )
        out.append(_set(values, "data_parallel", None, note))
        if _layout_fits(kind, values):
            return out
    model_parallel = _model_parallel(kind, values)
    if layout_moved:
        wanted = max(1, math.floor(values["num_gpus"] / model_parallel + 0.5)) * model_parallel
        if wanted <= _upper(kind, "num_gpus"):
            note = (
                f"{gpus} set from {values['num_gpus']:,} to {wanted:,}, the nearest multiple of "
                f"{_product_text(kind, labels)} = {model_parallel:,}."
            )
            return [*out, _set(values, "num_gpus", wanted, note)]
    # The GPU count moved: the largest layout (each degree a divisor of its current value) that divides it;
    # on a tie, keep the earlier degrees (TP before PP before CP) larger.
    names = LAYOUT[kind]
    combos = itertools.product(*(_divisors(int(values[name])) for name in names))
    fitting = [c for c in combos if values["num_gpus"] % math.prod(c) == 0]
    best = max(fitting, key=lambda c: (math.prod(c), c))  # (1, 1, ...) always fits
    for name, degree in zip(names, best, strict=True):
        if degree != values[name]:
            note = (
                f"{labels.get(name, name)} lowered from {values[name]:,} to {degree:,} to fit "
                f"{values['num_gpus']:,} GPUs ({gpus} must be a multiple of {_product_text(kind, labels)})."
            )
            out.append(_set(values, name, degree, note))
    return out


def _fit_inference_experts(values: dict[str, Any], changed: set[str], labels: Mapping[str, str]) -> list[Adjustment]:
    """EP must divide TP, or be a multiple of TP that divides a pipeline stage's GPUs (InferenceScenario)."""
    ep = int(values.get("expert_parallel", 1))
    if ep == 1 or "expert_parallel" in changed or not _layout_fits("inference", values):
        return []
    tp = int(values["tensor_parallel"])
    stage_gpus = values["num_gpus"] // int(values["pipeline_parallel"])

    def valid(e: int) -> bool:
        return tp % e == 0 or (e % tp == 0 and stage_gpus % e == 0)

    if valid(ep):
        return []
    fitted = max(e for e in _divisors(ep) if valid(e))
    label = labels.get("expert_parallel", "expert_parallel")
    note = f"{label} lowered from {ep:,} to {fitted:,} to fit the new layout."
    return [_set(values, "expert_parallel", fitted, note)]


def _fit_training_experts(values: dict[str, Any], changed: set[str], labels: Mapping[str, str]) -> list[Adjustment]:
    """EP ranks are carved out of the data-parallel ranks, so EP must divide DP (TrainingScenario)."""
    ep = int(values.get("expert_parallel", 1))
    dp = _data_parallel("training", values)
    if ep == 1 or dp is None or dp % ep == 0 or "expert_parallel" in changed or not _layout_fits("training", values):
        return []
    fitted = math.gcd(ep, dp)
    label = labels.get("expert_parallel", "expert_parallel")
    note = f"{label} lowered from {ep:,} to {fitted:,}: it must divide {labels.get('data_parallel', 'DP')} = {dp:,}."
    return [_set(values, "expert_parallel", fitted, note)]


def _fit_global_batch(values: dict[str, Any], labels: Mapping[str, str]) -> list[Adjustment]:
    if not all(name in values for name in ("micro_batch_size", "global_batch_size")):
        return []
    dp = _data_parallel("training", values) if _layout_fits("training", values) else None
    if dp is None:
        return []
    per_step = int(values["micro_batch_size"]) * dp
    batch = int(values["global_batch_size"])
    if batch % per_step == 0:
        return []
    upper = _upper("training", "global_batch_size")
    if per_step > upper:
        return []  # no multiple is allowed: the validation error says why
    rounded = min(max(1, math.floor(batch / per_step + 0.5)), upper // per_step) * per_step
    micro, data = labels.get("micro_batch_size", "micro_batch_size"), labels.get("data_parallel", "data_parallel")
    note = (
        f"{labels.get('global_batch_size', 'global_batch_size')} rounded from {batch:,} to {rounded:,}, the nearest "
        f"multiple of {micro} × {data} = {values['micro_batch_size']:,} × {dp:,} = {per_step:,} "
        "(gradient accumulation needs whole micro-batches)."
    )
    return [_set(values, "global_batch_size", rounded, note)]
