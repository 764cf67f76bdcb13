"""Scenario <-> URL query parameters: the whole plan lives in the link.

Parameter names are `<prefix><field>` (the dashboard uses its widget keys, e.g. `inference_concurrency`),
defaults are omitted so links stay short, and an inline model config or custom GPU travels as
`cfg:` + base64url(zlib(JSON)). Reading is forgiving: every parameter is checked on its own; a bad one
is reported by name and replaced by the default, never fatal.

An inference scenario's request stream (`traffic`) travels as readable parameters, one per inner field, the
names the dashboard's Traffic widgets use: `<prefix>traffic=true` (the scenario has a stream), then
`<prefix>traffic_<field>` for each of its fields that differs from its default and `<prefix>traffic_slo_<field>`
for the SLO's (`<prefix>traffic_prefix_pool_<field>` for a prefix pool's). A recorded trace never travels (up to 10^5 rows is no link): the link says `lengths=trace`
and its reader falls back to fixed lengths with a warning. The blob form (`<prefix>traffic=cfg:...`) is read too.

Speculative decoding (`speculative`) travels the same way, except that its method is the marker's value:
`<prefix>speculative=mtp` (or `draft_model`, `eagle`; `true` means the default method), then
`<prefix>speculative_num_speculative_tokens`, `_acceptance_rate`, `_draft_model` where they differ from their
defaults. A link whose speculative decoding cannot work with its scenario (MTP on a model without MTP modules,
a draft with another vocabulary, pipeline parallelism) is planned without it, with the engine's sentence.

A calibration travels in the `calibration` parameter: `<fingerprint>~<record id>~<base64url(zlib(JSON))>`
(the record itself, a few kB), or `<fingerprint>~<record id>` alone when the record is too large for a link
(the receiver then looks the id up in its own store and checks the fingerprint). A link never carries the
sender's mapping to other GPUs: the receiver applies the calibration to plans for the GPU it measured only.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import typing
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import urlencode

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from planner.calibration.errors import CalibrationFileError
from planner.calibration.store import NOT_STORED, record_from_data
from planner.calibration_record import CalibrationRecord
from planner.errors import PlanningError, explain
from planner.hardware.catalog import resolve_accelerator
from planner.inference.draft import SpeculativeDecoding
from planner.inference.scenario import InferenceScenario
from planner.inference.workload import PrefixPool, Slo, Traffic
from planner.model.catalog import resolve_model
from planner.model.checkpoint_precision import checkpoint_weight_dtypes
from planner.safe_json import load_json
from planner.training.scenario import TrainingScenario

INLINE_PREFIX = "cfg:"
MAX_PARAM_CHARS = 16_384  # a compressed config.json is ~1-2 kB; anything far larger is not ours
MAX_INLINE_JSON_BYTES = 256 * 1024
CALIBRATION_PARAM = "calibration"
# Above this the record is left out of the link (id and fingerprint only). The checked-in CPU record is
# ~5,100 characters; browsers and Tornado accept URLs far longer, but a link should stay pasteable.
MAX_CALIBRATION_PARAM_CHARS = 12_000
FINGERPRINT_CHARS = 12
_CALIBRATION_VALUE = re.compile(
    rf"^([0-9a-f]{{{FINGERPRINT_CHARS}}})~([A-Za-z0-9][A-Za-z0-9._-]{{0,119}})(?:~([A-Za-z0-9_-]+))?$"
)
LAYOUT_FIELDS = (
    "num_gpus",
    "tensor_parallel",
    "pipeline_parallel",
    "expert_parallel",
    "data_parallel",
    "context_parallel",
)


# Nested records that travel as one parameter per inner field (see the module docstring), and their inner
# fields that never travel.
FLATTENED: dict[str, type[BaseModel]] = {"traffic": Traffic, "speculative": SpeculativeDecoding}
# Flattened records whose marker parameter carries one of their fields (a choice) instead of "true".
MARKER_FIELDS: dict[str, str] = {"speculative": "method"}
# Records the plan can do without: when their parameters do not fit together or with the rest of the link, the
# link is planned without them (the others fall back to a safe value of their own).
DROPPABLE = ("speculative", "lora")
NESTED: dict[str, type[BaseModel]] = {"slo": Slo, "prefix_pool": PrefixPool}
NOT_IN_LINKS = ("trace",)
ON_TEXTS = ("true", "on", "yes", "1")
OFF_TEXTS = ("false", "off", "no", "0", "none", "null", "")
TRACE_NOT_IN_LINK = (
    "The link's request stream used an uploaded trace, which a link cannot carry; its requests get fixed "
    "lengths until a trace is uploaded."
)


def scenario_classes() -> dict[str, type]:

    return {"inference": InferenceScenario, "training": TrainingScenario}


def encode_inline(value: dict) -> str:
    raw = json.dumps(value, separators=(",", ":"), sort_keys=True).encode()
    return INLINE_PREFIX + base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode().rstrip("=")


def decode_inline(text: str) -> dict:
    body = text[len(INLINE_PREFIX) :]
    try:
        packed = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        decompressor = zlib.decompressobj()
        raw = decompressor.decompress(packed, MAX_INLINE_JSON_BYTES)
        if decompressor.unconsumed_tail:
            raise ValueError("inline config is too large")
        value = load_json(raw, "inline config", MAX_INLINE_JSON_BYTES)
    except (ValueError, zlib.error) as exc:  # PlanningError is a ValueError
        raise ValueError(f"not a valid inline config ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError("inline config must be a JSON object")
    return value


def _to_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return encode_inline(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value)) if abs(value) < 1e15 else repr(value)
    return str(value)


def scenario_to_query_params(scenario, prefix: str = "") -> dict[str, str]:
    """Only the fields that differ from their defaults, as strings."""
    defaults = type(scenario).model_fields
    params = {}
    for name, field in defaults.items():
        if name == "kind":
            continue
        value = getattr(scenario, name)
        if value == field.get_default(call_default_factory=True) and not _derived_when_absent(scenario, name):
            continue
        if name in FLATTENED and isinstance(value, BaseModel):
            marker = MARKER_FIELDS.get(name)
            params[prefix + name] = "true" if marker is None else _to_text(getattr(value, marker))
            _flatten(prefix + name, value, params, skip=(marker,) if marker else ())
            continue
        if hasattr(value, "model_dump"):
            value = value.model_dump(mode="json")
        params[prefix + name] = _to_text(value)
    return params


def _derived_when_absent(scenario, name: str) -> bool:
    """A field whose absence means something else than its default: an inference scenario that names no
    weight format serves a quantized checkpoint as stored, so a link must say "bf16" when bf16 was chosen."""
    if name != "weight_dtype" or getattr(scenario, "kind", None) != "inference":
        return False
    return checkpoint_weight_dtypes(scenario.architecture()) is not None


def _flatten(key: str, record: BaseModel, params: dict[str, str], skip: tuple[str, ...] = ()) -> None:
    """`key_<field>` for each field of `record` that differs from its default (nested records recursively),
    except the fields in `skip` (a marker field, carried by `key` itself)."""
    fields = type(record).model_fields
    for name, field in fields.items():
        value = getattr(record, name)
        if name in NOT_IN_LINKS or name in skip or value == field.get_default(call_default_factory=True):
            continue
        if isinstance(value, BaseModel):
            before = len(params)
            _flatten(f"{key}_{name}", value, params)
            if len(params) == before:
                # Every field at its default still has to say the record exists: its last field does.
                last = list(type(value).model_fields)[-1]
                params[f"{key}_{name}_{last}"] = _to_text(getattr(value, last))
            continue
        params[f"{key}_{name}"] = _to_text(value.model_dump(mode="json") if isinstance(value, BaseModel) else value)


def param_field(name: str) -> str:
    """The scenario field a link parameter (without its prefix) belongs to: `traffic_slo_ttft_seconds` -> traffic."""
    for field in FLATTENED:
        if name.startswith(field + "_"):
            return field
    return name


def share_url(
    scenario,
    base_url: str = "http://localhost:8501",
    page: str | None = None,
    prefix: str | None = None,
    calibration: CalibrationRecord | None = None,
) -> str:
    page = page or scenario.kind
    prefix = f"{page}_" if prefix is None else prefix
    params = scenario_to_query_params(scenario, prefix)
    if calibration is not None:
        params[CALIBRATION_PARAM] = encode_calibration(calibration)
    query = urlencode(params)
    return f"{base_url.rstrip('/')}/{page}" + (f"?{query}" if query else "")


# ------------------------------------------------------------------------------------- calibration


def _calibration_json(record: CalibrationRecord) -> str:
    """The record as the link carries it: stored fields only (derived values are recomputed on arrival)."""
    return record.model_dump_json(exclude=set(NOT_STORED), exclude_computed_fields=True)


def calibration_fingerprint(record: CalibrationRecord) -> str:
    """A short hash of the record's stored fields, keys sorted (the link's JSON sorts them, which reorders
    the record's dicts): the same measurement gives the same fingerprint on every server. The caller's
    mapping to other GPUs is not part of it."""
    canonical = json.dumps(json.loads(_calibration_json(record)), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:FINGERPRINT_CHARS]


def encode_calibration(record: CalibrationRecord, max_chars: int = MAX_CALIBRATION_PARAM_CHARS) -> str:
    """The `calibration` link value: fingerprint and id, plus the record itself when it fits in `max_chars`."""
    head = f"{calibration_fingerprint(record)}~{record.id}"
    body = encode_inline(json.loads(_calibration_json(record)))[len(INLINE_PREFIX) :]
    full = f"{head}~{body}"
    return full if len(full) <= max_chars else head


@dataclass(frozen=True)
class CalibrationLink:
    """What a `calibration` link value says: the record's fingerprint and id, and the record when embedded."""

    fingerprint: str
    record_id: str
    record: CalibrationRecord | None


def decode_calibration(text: str) -> CalibrationLink:
    """Read a `calibration` link value; ValueError with a sentence when it is not one or does not check out."""
    if len(text) > MAX_PARAM_CHARS:
        raise ValueError(f"the value is {len(text):,} characters long (at most {MAX_PARAM_CHARS:,})")
    match = _CALIBRATION_VALUE.match(text)
    if match is None:
        raise ValueError("not a Headroom calibration (expected '<fingerprint>~<id>' or '<fingerprint>~<id>~<record>')")
    fingerprint, record_id, body = match.groups()
    if body is None:
        return CalibrationLink(fingerprint, record_id, None)
    data = decode_inline(INLINE_PREFIX + body)
    try:
        record = record_from_data(data, "the link's calibration")
    except CalibrationFileError as exc:
        raise ValueError(str(exc)) from None
    if record.id != record_id or calibration_fingerprint(record) != fingerprint:
        raise ValueError(
            f"the embedded record ({record.id}, fingerprint {calibration_fingerprint(record)}) does not match the "
            f"link's id and fingerprint ({record_id}, {fingerprint}): the link was altered or cut short"
        )
    return CalibrationLink(fingerprint, record_id, record)


def _literal_choices(annotation: Any) -> tuple:
    """A Literal's values, also inside an optional one (`Percentile | None`); () for any other annotation."""
    if typing.get_origin(annotation) is typing.Literal:
        return typing.get_args(annotation)
    return tuple(c for arg in typing.get_args(annotation) if arg is not type(None) for c in _literal_choices(arg))


def _from_text(cls: type, name: str, text: str) -> Any:
    if len(text) > MAX_PARAM_CHARS:
        raise ValueError(f"value is {len(text):,} characters long")
    if text.startswith(INLINE_PREFIX):
        return decode_inline(text)
    field_type = cls.model_fields[name].annotation
    annotation = str(field_type)
    optional = "None" in annotation or type(None) in typing.get_args(field_type)  # Optional[Literal[...]] too
    if text.lower() in ("none", "null", "") and optional:
        return None
    records = any(isinstance(a, type) and issubclass(a, BaseModel) for a in (field_type, *typing.get_args(field_type)))
    if text.startswith("{") and (records or "dict" in annotation or "Config" in annotation):
        return load_json(text, f"'{name}'")
    choices = _literal_choices(cls.model_fields[name].annotation)
    if choices and all(type(c) is int for c in choices) and re.fullmatch(r"-?\d{1,9}", text.strip()):
        return int(text)  # a Literal of numbers (the SLO's percentiles): the link's text is the number
    return text


def query_params_to_scenario(
    params: Mapping[str, str | Iterable[str]], kind: str = "inference", prefix: str = ""
) -> tuple[Any, list[str]]:
    """Build a scenario from query parameters. Returns (scenario, warnings); never raises for bad input.

    Unknown parameters with our prefix are reported; repeated parameters use the last value; each
    value is validated alone (type and range) and falls back to the default with a warning naming it.
    A combination that is impossible (e.g. a layout the model cannot use) falls back to the default
    layout, again with a warning.
    """
    cls = scenario_classes()[kind]
    warnings: list[str] = []
    fields: dict[str, Any] = {}
    flat: dict[str, dict[str, str]] = {}  # flattened record -> {inner parameter name: text}
    for key, raw in params.items():
        if prefix and not key.startswith(prefix):
            continue
        name = key[len(prefix) :]
        if isinstance(raw, (list, tuple)):
            values = list(raw)
            if not values:
                continue
            if len(values) > 1:
                warnings.append(f"'{key}' was given {len(values)} times; the last value is used.")
            raw = values[-1]
        text = str(raw)
        owner = param_field(name)
        if owner in FLATTENED and owner in cls.model_fields:
            flat.setdefault(owner, {})[name[len(owner) + 1 :] if name != owner else ""] = text
            continue
        if name not in cls.model_fields or name == "kind":
            warnings.append(f"Unknown link parameter '{key}' was ignored.")
            continue
        try:
            value = _from_text(cls, name, text)
            _field_validator(cls).model_validate({name: value})
            if name == "model":
                resolve_model(value)
            elif name == "gpu":
                resolve_accelerator(value)
        except (ValidationError, ValueError, PlanningError) as exc:
            default = cls.model_fields[name].get_default(call_default_factory=True)
            shown = text if len(text) <= 40 else text[:37] + "..."
            warnings.append(
                f"Link parameter '{key}' = '{shown}' is invalid ({_short(exc)}); using the default {default!r}."
            )
            continue
        fields[name] = value
    for owner, inner in flat.items():
        fields[owner] = _read_flattened(FLATTENED[owner], inner, prefix + owner, warnings)
    try:
        return cls(**fields), warnings
    except (ValidationError, PlanningError) as exc:
        message = _short(exc)
    for owner in DROPPABLE:
        if fields.get(owner) is None:
            continue
        without = {k: v for k, v in fields.items() if k != owner}
        try:
            scenario = cls(**without)
        except (ValidationError, PlanningError):
            continue
        warnings.append(
            f"The link's {_RECORD_WORDS.get(owner, owner)} ({prefix + owner}) cannot work with its scenario: "
            f"{message}. The plan is shown without it."
        )
        return scenario, warnings
    layout_given = [f for f in LAYOUT_FIELDS if f in fields]
    retry = {k: v for k, v in fields.items() if k not in LAYOUT_FIELDS}
    try:
        scenario = cls(**retry)
        warnings.append(
            f"The link's layout ({', '.join(prefix + f for f in layout_given) or 'defaults'}) cannot "
            f"work: {message}. The default layout is used instead."
        )
        return scenario, warnings
    except (ValidationError, PlanningError) as exc:
        warnings.append(f"The link describes an impossible plan ({_short(exc)}); the default scenario is shown.")
        return cls(), warnings


def _read_flattened(
    record_cls: type[BaseModel], inner: dict[str, str], key: str, warnings: list[str]
) -> BaseModel | None:
    """A flattened record from its parameters (`inner`: name after `key_` -> text; "" is `key` itself).

    `key` alone says whether the record exists (true/false, or the whole record as `cfg:` JSON); inner
    parameters without it imply it does. Each inner parameter is checked alone (a bad one is named and left
    at its default); a trace the link cannot carry leaves fixed lengths, with a warning.
    """
    marker = inner.pop("", None)
    base: dict[str, Any] = {}
    marker_field = next((f for owner, f in MARKER_FIELDS.items() if FLATTENED[owner] is record_cls), None)
    choices = _choices(record_cls, marker_field) if marker_field else ()
    droppable = any(FLATTENED.get(owner) is record_cls for owner in DROPPABLE)
    if marker is not None:
        text = marker.strip().lower()
        if text in choices and marker_field is not None:
            base[marker_field] = text
        elif marker.startswith(INLINE_PREFIX):
            try:
                base = dict(record_cls.model_validate(decode_inline(marker)).model_dump(exclude_defaults=True))
            except (ValidationError, ValueError) as exc:
                warnings.append(
                    f"Link parameter '{key}' is not a valid {record_cls.__name__} ({_short(exc)}); ignored."
                )
        elif text in OFF_TEXTS:
            return None
        elif choices and text not in ON_TEXTS:
            expected = ", ".join(choices[:-1]) + f" or {choices[-1]}"
            warnings.append(
                f"Link parameter '{key}' = '{marker[:40]}' is invalid (expected {expected}, or false); "
                f"the plan is shown without {_RECORD_WORDS.get(key.rsplit('_', 1)[-1], 'it')}."
            )
            return None
        elif text not in ON_TEXTS:
            warnings.append(f"Link parameter '{key}' = '{marker[:40]}' is invalid (true or false); it is read as true.")
    values = _read_inner(record_cls, inner, key, warnings)
    fields = {**base, **values}
    if fields.get("lengths") == "trace" and not fields.get("trace"):
        warnings.append(TRACE_NOT_IN_LINK)
        fields["lengths"] = "fixed"
    try:
        return record_cls(**fields)
    except (ValidationError, PlanningError) as exc:
        if droppable:
            warnings.append(f"The link's {key} parameters do not fit together ({_short(exc)}); it is left out.")
            return None
        warnings.append(f"The link's {key} parameters do not fit together ({_short(exc)}); fixed lengths are used.")
    try:
        return record_cls(**{**fields, "lengths": "fixed"})
    except (ValidationError, PlanningError):
        return record_cls()


def _read_inner(record_cls: type[BaseModel], inner: dict[str, str], key: str, warnings: list[str]) -> dict[str, Any]:
    """Each inner parameter of a flattened record, checked alone; nested records (the SLO) by their own names."""
    values: dict[str, Any] = {}
    nested: dict[str, dict[str, str]] = {}
    for name, text in inner.items():
        nested_name = next((n for n in NESTED if name.startswith(n + "_") and n in record_cls.model_fields), None)
        if nested_name is not None:
            nested.setdefault(nested_name, {})[name[len(nested_name) + 1 :]] = text
            continue
        if name in NOT_IN_LINKS:
            warnings.append(f"Link parameter '{key}_{name}' was ignored: a link cannot carry a trace; upload it.")
            continue
        if name not in record_cls.model_fields or name in NESTED:
            warnings.append(f"Unknown link parameter '{key}_{name}' was ignored.")
            continue
        try:
            value = _from_text(record_cls, name, text)
            _field_validator(record_cls).model_validate({name: value})
        except (ValidationError, ValueError, PlanningError) as exc:
            default = record_cls.model_fields[name].get_default(call_default_factory=True)
            shown = text if len(text) <= 40 else text[:37] + "..."
            warnings.append(
                f"Link parameter '{key}_{name}' = '{shown}' is invalid ({_short(exc)}); using the default {default!r}."
            )
            continue
        values[name] = value
    for name, nested_inner in nested.items():
        nested_cls = NESTED[name]
        nested_values = _read_inner(nested_cls, nested_inner, f"{key}_{name}", warnings)
        values[name] = nested_cls(**nested_values)
    return values


_RECORD_WORDS = {"speculative": "speculative decoding", "traffic": "request stream", "lora": "LoRA adapters"}


def _choices(record_cls: type[BaseModel], name: str) -> tuple[str, ...]:
    """The values a Literal field of a record allows, as link text."""
    return tuple(str(c) for c in typing.get_args(record_cls.model_fields[name].annotation))


@cache
def _field_validator(cls: type) -> type[BaseModel]:
    """The scenario's fields without its cross-field validation: checks one parameter at a time."""
    # Any: create_model takes each field as a keyword (annotation, FieldInfo) beside its own dunder options.
    fields: dict[str, Any] = {name: (field.annotation, field) for name, field in cls.model_fields.items()}
    return create_model(f"{cls.__name__}Fields", __config__=ConfigDict(extra="forbid"), **fields)


def _short(exc: Exception) -> str:
    text = explain(exc)
    return text if len(text) <= 300 else text[:297] + "..."
