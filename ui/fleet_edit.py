"""The Fleet page's input: the fleet as a JSON object (the document), its editable tables, an upload and the link.

The document is what `planner.fleet.parse_fleet` reads. The tables show the fields a capacity review changes
(deployments: model, pools, layout, SLO, load; pools: GPU, size, prices) and write them back onto a copy of the
document, so every field the tables leave out (lengths, runtime, power, spares, ...) survives an edit. This module
only reshapes data; validation is the engine's (pydantic at the edge), each failure one sentence.
"""

from __future__ import annotations

import copy
import json
import math
import re
from pathlib import Path
from typing import Any

import pandas as pd

from planner.safe_json import load_json
from planner.share import INLINE_PREFIX, MAX_PARAM_CHARS, decode_inline, encode_inline

EXAMPLE_PATH = Path(__file__).resolve().parents[1] / "examples" / "fleet-three-models.json"
LINK_PARAM = "fleet"
MAX_UPLOAD_BYTES = 1 << 20
NEW_ROW_REQUESTS = 300  # simulated requests per load curve for a deployment added in the table

DEPLOYMENT_COLUMNS = {  # the load first: what a capacity review changes most
    "name": "Name",
    "model": "Model",
    "peak": "Peak (req/s)",
    "trough": "Trough (req/s)",
    "peak_hour": "Peak hour",
    "ttft": "TTFT SLO (s)",
    "tpot": "TPOT SLO (s)",
    "e2e": "E2E SLO (s)",
    "percentile": "Percentile",
    "pools": "Pools",
    "tp": "TP",
    "pp": "PP",
    "ep": "EP",
    "layouts": "Candidate layouts",
    "rate_by_hour": "Rate by hour (24 req/s)",
    "requests": "Simulated requests",
}
POOL_COLUMNS = {
    "name": "Name",
    "gpu": "GPU",
    "max_gpus": "Max GPUs",
    "on_demand": "On demand ($/GPU-h)",
    "reserved": "Reserved ($/GPU-h)",
    "spot": "Spot ($/GPU-h)",
    "spot_share": "Spot share",
    "interruptions": "Spot interruptions/day",
}
POOL_FIELDS = {
    "max_gpus": "max_gpus",
    "on_demand": "on_demand_usd_per_hour",
    "reserved": "reserved_usd_per_hour",
    "spot": "spot_usd_per_hour",
    "spot_share": "spot_share",
    "interruptions": "spot_interruptions_per_day",
}
SLO_FIELDS = {"ttft": "ttft_seconds", "tpot": "tpot_seconds", "e2e": "e2e_latency_seconds"}
_LAYOUT = re.compile(r"^\s*TP\s*(\d+)(?:\s+PP\s*(\d+))?(?:\s+EP\s*(\d+))?\s*$", re.IGNORECASE)


class FleetInputError(ValueError):
    """A table cell, an upload or a link that is not a fleet, in one sentence."""


def example_fleet() -> dict[str, Any]:
    """The embedded example (examples/fleet-three-models.json), the page's default."""
    return json.loads(EXAMPLE_PATH.read_text())


def _plain(value: Any) -> Any:
    """Whole floats as ints (a table gives 3 where the JSON said 3.0: the same fleet)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def canonical_json(doc: dict[str, Any]) -> str:
    """The document as one stable string (keys sorted, whole floats as ints): the plan cache's key."""
    return json.dumps(_plain(doc), sort_keys=True, separators=(",", ":"))


# ------------------------------------------------------------------------------------------- upload and link


def fleet_from_upload(name: str, data: bytes) -> dict[str, Any]:
    if len(data) > MAX_UPLOAD_BYTES:
        raise FleetInputError(f"{name} is {len(data) / 1e6:.1f} MB; a fleet JSON is at most 1 MB")
    try:
        value = load_json(data, name, MAX_UPLOAD_BYTES)
    except ValueError as exc:
        raise FleetInputError(str(exc)) from None
    if not isinstance(value, dict) or value.get("kind", "fleet") != "fleet" or "deployments" not in value:
        raise FleetInputError(f"{name} is not a fleet: expected a JSON object with kind 'fleet', deployments and pools")
    return value


def encode_link(doc: dict[str, Any]) -> str:
    return encode_inline(doc)


def fleet_from_link(text: str) -> dict[str, Any]:
    if len(text) > MAX_PARAM_CHARS or not text.startswith(INLINE_PREFIX):
        raise FleetInputError("The link's fleet is not a Headroom fleet (expected 'fleet=cfg:…')")
    try:
        value = decode_inline(text)
    except ValueError as exc:
        raise FleetInputError(f"The link's fleet could not be read ({exc})") from None
    if value.get("kind", "fleet") != "fleet" or "deployments" not in value:
        raise FleetInputError("The link's fleet is not a fleet (no kind 'fleet' with deployments)")
    return value


# ------------------------------------------------------------------------------------------------- cells


def _cell(value: Any) -> Any:
    """A table cell as plain Python: NaN, NA and empty text -> None."""
    if value is None:
        return None
    if isinstance(value, str):
        return value.strip() or None
    try:
        if pd.isna(value):
            return None
    except (TypeError, ValueError):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value.item() if hasattr(value, "item") else value


def _number(value: Any, what: str) -> float | None:
    value = _cell(value)
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise FleetInputError(f"{what} must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise FleetInputError(f"{what} must be a finite number, got {value!r}")
    return int(number) if number.is_integer() else number


def _layouts_text(layouts: Any) -> str:
    if not isinstance(layouts, list):
        return ""
    parts = []
    for item in layouts:
        if not isinstance(item, dict):
            continue
        text = f"TP{item.get('tensor_parallel', 1)}"
        if item.get("pipeline_parallel", 1) != 1:
            text += f" PP{item['pipeline_parallel']}"
        if item.get("expert_parallel", 1) != 1:
            text += f" EP{item['expert_parallel']}"
        parts.append(text)
    return ", ".join(parts)


def _parse_layouts(text: str | None, who: str) -> list[dict[str, int]]:
    layouts = []
    for part in (text or "").split(","):
        if not part.strip():
            continue
        match = _LAYOUT.match(part)
        if not match:
            raise FleetInputError(f"{who}: candidate layout {part.strip()!r} is not like 'TP4', 'TP8 PP2' or 'TP8 EP8'")
        tp, pp, ep = (int(g) if g else 1 for g in match.groups())
        layout = {"tensor_parallel": tp}
        if pp != 1:
            layout["pipeline_parallel"] = pp
        if ep != 1:
            layout["expert_parallel"] = ep
        layouts.append(layout)
    return layouts


def _parse_rates(text: str | None, who: str) -> list[float] | None:
    if text is None:
        return None
    parts = [p for p in re.split(r"[,\s;]+", str(text)) if p]
    rates = [_number(p, f"{who}: rate by hour") for p in parts]
    if len(rates) != 24:
        raise FleetInputError(f"{who}: rate by hour needs 24 numbers (00:00 to 23:00), got {len(rates)}")
    return [float(r) for r in rates if r is not None]


# ------------------------------------------------------------------------------------------- deployments


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _base(bases: list[dict[str, Any]], index: Any, originals: int) -> dict[str, Any] | None:
    """The document's entry a table row edits (the editor keeps the original row index), None for an added row."""
    try:
        position = int(index)
    except (TypeError, ValueError):
        return None
    return bases[position] if 0 <= position < min(originals, len(bases)) else None


def deployments_frame(doc: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for entry in doc.get("deployments") or []:
        if not isinstance(entry, dict):
            continue
        s = _dict(entry.get("scenario"))
        traffic = _dict(s.get("traffic"))
        slo = _dict(traffic.get("slo"))
        diurnal = _dict(entry.get("diurnal"))
        rates = entry.get("rate_by_hour")
        model = s.get("model")
        rows.append(
            {
                "name": entry.get("name"),
                "model": model if isinstance(model, str) else "(inline config)",
                "pools": ", ".join(entry.get("pools") or []),
                "tp": s.get("tensor_parallel", 1),
                "pp": s.get("pipeline_parallel", 1),
                "ep": s.get("expert_parallel", 1),
                "layouts": _layouts_text(entry.get("layouts")),
                "ttft": slo.get("ttft_seconds"),
                "tpot": slo.get("tpot_seconds"),
                "e2e": slo.get("e2e_latency_seconds"),
                "percentile": slo.get("percentile", 99),
                "peak": diurnal.get("peak_requests_per_second"),
                "trough": diurnal.get("trough_requests_per_second"),
                "peak_hour": diurnal.get("peak_hour", 14 if diurnal else None),
                "rate_by_hour": ", ".join(f"{r:g}" for r in rates) if isinstance(rates, list) else "",
                "requests": traffic.get("num_requests"),
            }
        )
    frame = pd.DataFrame(rows, columns=list(DEPLOYMENT_COLUMNS))
    for column in ("name", "model", "pools", "layouts", "rate_by_hour"):
        frame[column] = frame[column].astype("string")
    for column in ("tp", "pp", "ep", "requests"):
        frame[column] = frame[column].astype("Int64")
    for column in ("ttft", "tpot", "e2e", "percentile", "peak", "trough", "peak_hour"):
        frame[column] = frame[column].astype("Float64")
    return frame


def _deployment(row: dict[str, Any], base: dict[str, Any] | None, index: int) -> dict[str, Any] | None:
    """One table row written onto its deployment (a copy), or a new deployment for an added row."""
    name = _cell(row.get("name"))
    who = f"deployment '{name}'" if name else f"deployment row {index + 1}"
    entry = copy.deepcopy(base) if base is not None else {}
    if not name and base is None and all(_cell(v) is None for v in row.values()):
        return None  # an added row left empty
    if not name:
        raise FleetInputError(f"{who} needs a name")
    entry["name"] = str(name)
    scenario = entry.setdefault("scenario", {})
    model = _cell(row.get("model"))
    if model is None and base is None:
        raise FleetInputError(f"{who} needs a model (a catalog id such as 'llama-3.1-8b')")
    if model is not None and model != "(inline config)":
        scenario["model"] = str(model)
    layout = {
        k: _number(row.get(c), f"{who}: {DEPLOYMENT_COLUMNS[c]}")
        for k, c in (("tensor_parallel", "tp"), ("pipeline_parallel", "pp"), ("expert_parallel", "ep"))
    }
    before = {k: scenario.get(k, 1) for k in layout}
    layout = {k: (1 if v is None else v) for k, v in layout.items()}
    if layout != before or base is None:
        scenario.update(layout)
        for k, v in layout.items():
            if v == 1 and k != "tensor_parallel":
                scenario.pop(k)
        scenario["num_gpus"] = layout["tensor_parallel"] * layout["pipeline_parallel"]
    pools = [p.strip() for p in str(_cell(row.get("pools")) or "").split(",") if p.strip()]
    if pools:
        entry["pools"] = pools
    else:
        entry.pop("pools", None)
    layouts = _parse_layouts(_cell(row.get("layouts")), who)
    if layouts:
        entry["layouts"] = layouts
    else:
        entry.pop("layouts", None)
    traffic = scenario.setdefault("traffic", {})
    slo = dict(traffic.get("slo") or {})
    for column, field in SLO_FIELDS.items():
        value = _number(row.get(column), f"{who}: {DEPLOYMENT_COLUMNS[column]}")
        if value is None:
            slo.pop(field, None)
        else:
            slo[field] = value
    percentile = _number(row.get("percentile"), f"{who}: percentile")
    if percentile is not None:
        slo["percentile"] = percentile
    traffic["slo"] = slo
    requests = _number(row.get("requests"), f"{who}: simulated requests")
    if requests is not None:
        traffic["num_requests"] = requests
    elif base is None:
        traffic["num_requests"] = NEW_ROW_REQUESTS
    rates = _parse_rates(_cell(row.get("rate_by_hour")), who)
    peak = _number(row.get("peak"), f"{who}: peak")
    if rates is not None:
        entry["rate_by_hour"] = rates
        entry.pop("diurnal", None)
        entry.pop("rate_trace_csv", None)
    elif peak is not None:
        trough = _number(row.get("trough"), f"{who}: trough")
        hour = _number(row.get("peak_hour"), f"{who}: peak hour")
        entry["diurnal"] = {
            "peak_requests_per_second": peak,
            "trough_requests_per_second": 0 if trough is None else trough,
            "peak_hour": 14 if hour is None else hour,
        }
        entry.pop("rate_by_hour", None)
        entry.pop("rate_trace_csv", None)
    elif "rate_trace_csv" not in entry:
        raise FleetInputError(f"{who} needs a load: a peak (with trough and peak hour) or 24 rates by hour")
    return entry


def apply_deployments(doc: dict[str, Any], frame: pd.DataFrame, originals: int) -> list[dict[str, Any]]:
    """The table's rows as deployments: the first `originals` rows edit the document's deployments in order
    (rows deleted in the editor are gone from `frame`, which keeps the original index), the rest are new."""
    bases = [d for d in doc.get("deployments") or [] if isinstance(d, dict)]
    out = []
    for position, (index, row) in enumerate(frame.iterrows()):
        base = _base(bases, index, originals)
        entry = _deployment(row.to_dict(), base, position)
        if entry is not None:
            out.append(entry)
    return out


# ------------------------------------------------------------------------------------------------ pools


def pools_frame(doc: dict[str, Any]) -> pd.DataFrame:
    rows = []
    for entry in doc.get("pools") or []:
        if not isinstance(entry, dict):
            continue
        gpu = entry.get("gpu")
        row = {"name": entry.get("name"), "gpu": gpu if isinstance(gpu, str) else "(inline spec)"}
        row.update({column: entry.get(field) for column, field in POOL_FIELDS.items()})
        rows.append(row)
    frame = pd.DataFrame(rows, columns=list(POOL_COLUMNS))
    for column in ("name", "gpu"):
        frame[column] = frame[column].astype("string")
    frame["max_gpus"] = frame["max_gpus"].astype("Int64")
    for column in ("on_demand", "reserved", "spot", "spot_share", "interruptions"):
        frame[column] = frame[column].astype("Float64")
    return frame


def apply_pools(doc: dict[str, Any], frame: pd.DataFrame, originals: int) -> list[dict[str, Any]]:
    bases = [p for p in doc.get("pools") or [] if isinstance(p, dict)]
    out = []
    for position, (index, row) in enumerate(frame.iterrows()):
        base = _base(bases, index, originals)
        cells = {k: _cell(v) for k, v in row.to_dict().items()}
        if base is None and all(v is None for v in cells.values()):
            continue
        who = f"pool '{cells['name']}'" if cells["name"] else f"pool row {position + 1}"
        if not cells["name"]:
            raise FleetInputError(f"{who} needs a name")
        entry = copy.deepcopy(base) if base is not None else {}
        entry["name"] = str(cells["name"])
        if cells["gpu"] is None:
            raise FleetInputError(f"{who} needs a GPU (a catalog id such as 'h100-sxm')")
        if cells["gpu"] != "(inline spec)":
            entry["gpu"] = str(cells["gpu"])
        for column, field in POOL_FIELDS.items():
            value = _number(cells[column], f"{who}: {POOL_COLUMNS[column]}")
            if value is None:
                entry.pop(field, None)
            else:
                entry[field] = value
        out.append(entry)
    return out


def edited_fleet(
    doc: dict[str, Any],
    deployments: pd.DataFrame,
    pools: pd.DataFrame,
    settings: dict[str, Any],
) -> dict[str, Any]:
    """A copy of the document with the tables' rows and the fleet-wide settings written in."""
    out = copy.deepcopy(doc)
    out["deployments"] = apply_deployments(doc, deployments, len(doc.get("deployments") or []))
    out["pools"] = apply_pools(doc, pools, len(doc.get("pools") or []))
    autoscaling = dict(out.get("autoscaling") or {})
    autoscaling["headroom_share"] = settings["headroom_share"]
    out["autoscaling"] = autoscaling
    out["rate_scale"] = settings["rate_scale"]
    if settings["compare_disaggregation"]:
        out["compare_disaggregation"] = True
    else:
        out.pop("compare_disaggregation", None)
    return out
