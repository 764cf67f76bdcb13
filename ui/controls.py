"""Scenario widgets, created once here and used by every page that edits a scenario.

Session-state keys (``<page>`` is ``inference`` or ``training``)
-------------------------------------------------------------------
* ``<page>_<field>``: the widget of one scenario field (``inference_concurrency``). Its range, default,
  choices and help come from the pydantic field (``ui.specs.field_facts``); ``ui.specs.Spec`` adds only
  what pydantic cannot know (label, section, column, widget kind, unit scale, step, format). A widget that
  holds the field in the field's own units is bound to the URL (``bind="query-params"``): its key is the
  URL parameter and its default the field's default, so the URL carries exactly the inputs that differ
  from the defaults, in ``planner.share.scenario_to_query_params``'s format. A widget in scaled units
  (billions of tokens, GB/s) is not bound; this module writes its parameter.
* ``<page>_pick_<thing>``: pickers, widgets that build a value no single widget holds (ui.pickers:
  ``pick_model_source``, ``pick_model``, ``pick_size_b``, ``pick_moe``, ``pick_config_file``,
  ``pick_config_text``, ``pick_hub_id``, ``pick_gpu``, ``pick_gpu_<spec>``; ui.training_controls:
  ``pick_lora*``), and the concurrency's log-scale slider (``pick_concurrency``). None is bound; this
  module writes ``<page>_model``, ``<page>_gpu`` and ``<page>_lora`` to the URL itself.
* ``inference_traffic`` and ``inference_traffic_<field>``: the request stream's section (ui.traffic_controls),
  drawn in the Inference page's main area (``scenario_form(places=...)``), its widgets bound to the URL in
  ``planner.share``'s flattened format; ``traffic`` is an extra manual field, so this module writes the one
  parameter no widget is bound to (the TPOT target, shown in ms).
* ``inference_pick_speculative*``: the Speculative decoding section (ui.speculative_controls), in the sidebar;
  pickers (session state only), so ``speculative`` is an extra manual field whose parameters this module writes
  (``planner.share``: ``inference_speculative=<method>``, ``inference_speculative_<field>``). Its choices depend
  on the model picked above it (MTP only for a model with MTP modules; drafts with the model's vocabulary).
* ``<page>_memo``: one ``FormMemo``, what the form remembers between runs that no widget holds (the
  link's warnings, the last values, the notes about adjusted inputs, the pickers' uploaded config).
* ``current_<page>`` (``ui.state``): the scenario the page built last, read by the other pages.

Writing a widget's value (no duplicate-value warning)
------------------------------------------------------
Streamlit warns when a widget is created with a default and its value was also set through session state
in the same run, so this module never does both:

* pickers and scaled widgets are driven by session state only: seeded there, never given a default;
* a bound widget is given the field's default, except in a run where this module wrote its value before
  drawing it (a guided adjustment, the concurrency slider moving the box): that run draws it without a
  default. (Its URL parameter then stays even when it equals the default; harmless.)
* a bound widget that does not exist yet and must start away from its default (a link's corrected value,
  a scenario another page chose) is seeded the way Streamlit seeds it from a link: the form writes the
  value into the URL and reruns before drawing any widget. (A value written to session state before a
  ``st.rerun()`` still counts as written in the run after it.)

Guiding inputs
--------------
Before the widgets are drawn, ``ui.guide`` looks at the values the user just set and adjusts the
inputs that depend on them (TP/PP to the GPU count, the global batch to micro-batch x DP, ...); each
adjustment is written into its widget and explained in a note, instead of an error that blanks the page.
Errors that remain name the inputs by their labels.

Links
-----
On the form's first run in a session, a link is read with ``planner.share.query_params_to_scenario``
(every parameter checked, bad ones replaced by defaults, an impossible layout reset) and its warnings are
kept to show; where the URL says something else than that scenario, the URL is corrected before the widgets
are seeded from it (see above).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from planner.errors import PlanningError
from planner.model.catalog import resolve_model
from planner.model.checkpoint_precision import checkpoint_weight_dtypes
from planner.share import param_field, query_params_to_scenario, scenario_to_query_params
from ui import guide, pickers, state
from ui.form_specs import (
    CONCURRENCY_STOPS,
    CUSTOM_BOUND,
    CUSTOM_SECTIONS,
    CUSTOM_SEEDS,
    MAIN_SECTIONS,
    MODEL_AWARE,
    PLACEHOLDERS,
    SECTIONS,
    default_of,
    facts_for,
    in_labels,
    labels_for,
    manual_fields,
    specs_for,
)
from ui.pickers import PickerMemo
from ui.specs import Spec

# ------------------------------------------------------------------------------------ form memory


@dataclass
class FormMemo:
    """What a page's form remembers between runs that no widget holds (session state ``<page>_memo``)."""

    started: bool = False  # the form ran in this session (a link is read on the first run only)
    last_values: dict[str, Any] = field(default_factory=dict)  # field values the widgets showed last run
    written: set[str] = field(default_factory=set)  # widget keys a callback wrote for the coming run
    exact: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # scaled widgets: (shown, exact value)
    link: tuple[Any, list[str]] | None = None  # the link's scenario and its warnings
    notes: tuple[dict[str, Any], list[str]] | None = None  # adjusted inputs: (values after, sentences)
    last_model: Any = None  # the model the form planned last run (a new one brings its checkpoint's formats)
    pickers: PickerMemo = field(default_factory=PickerMemo)  # the model and GPU pickers' (ui.pickers)


def form_memo(kind: str) -> FormMemo:
    return st.session_state.setdefault(f"{kind}_memo", FormMemo())


# ------------------------------------------------------------------------------------ link reading


def _prefixed_params(prefix: str) -> dict[str, list[str]]:
    return {key: st.query_params.get_all(key) for key in st.query_params if key.startswith(prefix)}


def read_link(kind: str, params: dict[str, list[str]] | None = None):
    """The scenario a link describes and the warnings about it (never raises).

    `params` defaults to the current URL's parameters with this kind's prefix.
    """
    prefix = f"{kind}_"
    params = _prefixed_params(prefix) if params is None else params
    return query_params_to_scenario(params, kind, prefix)


def _fields(scenario) -> dict[str, Any]:
    return {name: getattr(scenario, name) for name in type(scenario).model_fields if name != "kind"}


def _store_link_warnings(kind: str, scenario, warnings: list[str]) -> None:
    form_memo(kind).link = (scenario, list(warnings)) if warnings else None


def pending_link_warnings(kind: str, current) -> list[str]:
    """Warnings of the link this session opened, while the plan is still the one the link described."""
    memo = form_memo(kind)
    if memo.link is None:
        return []
    scenario, warnings = memo.link
    if current is not None and current != scenario:
        memo.link = None
        return []
    return [in_labels(kind, warning) for warning in warnings]


def current_scenario(kind: str):
    """The scenario a display page (Trade-offs, Calibrate, Review) works on, and keep it in the URL.

    A fresh session opened from a link takes it from the URL; otherwise the input page's last scenario.
    """
    prefix = f"{kind}_"
    scenario = state.remembered(kind)
    params = _prefixed_params(prefix)
    if scenario is None:
        if params:
            scenario, warnings = read_link(kind, params)
            _store_link_warnings(kind, scenario, warnings)
        else:
            scenario = default_scenario(kind)
        state.remember(kind, scenario)
    write_url(kind, scenario, fields=None)
    return scenario


def default_scenario(kind: str):
    if kind == "training":
        # A first visit to Training starts from the model and GPU the user chose for inference (if any).
        base = state.remembered("inference")
        defaults = (default_of("inference", "model"), default_of("inference", "gpu"))
        if base is not None and (base.model, base.gpu) != defaults:
            candidate, _ = state.build_scenario("training", {"model": base.model, "gpu": base.gpu})
            if candidate is not None:
                return candidate
    return state.scenario_class(kind)()


def write_url(kind: str, scenario, fields: Sequence[str] | None) -> None:
    """Make the URL carry `fields` of the scenario (None: all of them); drop stale params of this prefix.

    An input page passes the fields no widget is bound to (Streamlit owns the bound ones, the Traffic section's
    included); a display page passes None. A field may travel as several parameters (the request stream:
    ``planner.share.param_field``).
    """
    prefix = f"{kind}_"
    wanted = scenario_to_query_params(scenario, prefix)
    names = set(type(scenario).model_fields) - {"kind"} if fields is None else set(fields)
    bound = set() if fields is None else bound_params(kind)
    present = {key for key in st.query_params if key.startswith(prefix)}
    for key in sorted(set(wanted) | present):
        if key in bound:
            continue
        if param_field(key[len(prefix) :]) not in names:
            if key in present:  # stale: no field of this scenario, no widget
                _set_param(key, None)
        elif key in wanted:
            if st.query_params.get_all(key) != [wanted[key]]:
                _set_param(key, wanted[key])
        elif key in present:
            _set_param(key, None)


def bound_params(kind: str) -> set[str]:
    """The URL parameters of this kind's bound widgets (the sidebar's specs and the custom sections')."""
    prefix = f"{kind}_"
    return {prefix + s.name for s in specs_for(kind) if s.bound} | set(CUSTOM_BOUND.get(kind, lambda p: set())(prefix))


def _set_param(key: str, value: str | None) -> bool:
    """Set (None: delete) one URL parameter unless a widget still owns it (ui.state.set_url_param)."""
    return state.set_url_param(key, value)


# ------------------------------------------------------------------------------------ the widgets


def _widget(kind: str, spec: Spec, where, from_state: bool) -> Any:
    """Draw one field's widget; its value in widget units.

    `from_state`: the value is in session state already (written this run, or a state-driven widget), so
    the widget gets no default. Otherwise it gets the field's default (the URL leaves it out).
    """
    facts = facts_for(kind, spec.name)
    common: dict[str, Any] = {"key": f"{kind}_{spec.name}", "help": facts.help()}
    if spec.bound:
        common["bind"] = "query-params"
    else:
        common["persist_state"] = "session"
    default = spec.to_widget(facts.default)
    w = spec.widget
    if w == "number":
        lo, hi = facts.widget_range(spec.scale)
        numeric = int if facts.kind is int and spec.scale == 1.0 else float
        if facts.optional:
            value: Any = None
        elif from_state:
            # A bound widget drawn without a default must not have one the value could equal (Streamlit would
            # then drop the URL parameter); an unbound one just starts at its minimum.
            value = None if spec.bound else "min"
        else:
            value = numeric(default)
        return where.number_input(
            spec.label,
            min_value=None if lo is None else numeric(lo),
            max_value=None if hi is None else numeric(hi),
            value=value,
            step=numeric(spec.step or 1),
            format=spec.fmt,
            placeholder=PLACEHOLDERS.get(spec.name),
            **common,
        )
    if w == "slider":
        lo, hi = facts.widget_range(spec.scale)
        if lo is None or hi is None:
            raise ValueError(f"{spec.name}: a slider needs a field bounded on both sides")
        return where.slider(
            spec.label,
            min_value=float(lo),
            max_value=float(hi),
            value=None if from_state else float(default),
            step=float(spec.step or 0.01),
            **common,
        )
    if w == "select":
        options = list(facts.options())
        if facts.optional:  # empty means the field's own default rule (its placeholder says which)
            options = [None, *options]
            common["format_func"] = lambda v: PLACEHOLDERS.get(spec.name, "default") if v is None else str(v)
        index = None if from_state else options.index(default)
        return where.selectbox(spec.label, options, index=index, **common)
    if w == "multiselect":  # state-driven (not bound): seeded with the field's names as a list
        return where.multiselect(spec.label, list(facts.options()), **common)
    if w == "toggle":
        return where.toggle(spec.label, value=False if from_state else bool(default), **common)
    if w == "text":
        return where.text_input(spec.label, value="" if from_state else default, max_chars=facts.max_chars, **common)
    if w == "textarea":
        return where.text_area(
            spec.label, value="" if from_state else default, max_chars=facts.max_chars, height=110, **common
        )
    raise ValueError(f"{spec.name}: widget kind {w} is drawn by its own function")


def _nearest_stop(value: int) -> int:
    """The concurrency slider's stop closest to `value` on a log scale."""
    return min(CONCURRENCY_STOPS, key=lambda stop: abs(math.log(stop) - math.log(max(value, 1))))


def _slider_moved(kind: str, name: str) -> None:
    """The concurrency slider moved: its stop goes into the number box (drawn later this run, without default)."""
    key = f"{kind}_{name}"
    st.session_state[key] = st.session_state[f"{kind}_pick_{name}"]
    form_memo(kind).written.add(key)


def _concurrency(kind: str, spec: Spec, where, written: set[str], memo: FormMemo) -> int:
    """A log-scale slider for moving fast and a number box for exact values, both for one field.

    The box is the bound widget (the URL parameter); the slider is a picker that shows the box's value at its
    nearest stop. When the slider moves, its callback writes the stop into the box (``_slider_moved``).
    """
    ss = st.session_state
    box_key, pick_key = f"{kind}_{spec.name}", f"{kind}_pick_{spec.name}"
    facts = facts_for(kind, spec.name)
    lo, hi = facts.widget_range()
    left, right = where.columns([3, 2], vertical_alignment="bottom")
    exact = right.number_input(
        "Exact",
        min_value=lo,
        max_value=hi,
        value=None if box_key in written else int(facts.default),
        step=1,
        key=box_key,
        bind="query-params",
        help=f"{facts.help()}: any whole number from {lo:,} to {hi:,}.",
    )
    if exact is None:  # a box drawn without a default can be emptied: keep the last value
        exact = memo.last_values.get(spec.name, facts.default)
    ss[pick_key] = _nearest_stop(exact)
    left.select_slider(
        spec.label,
        options=CONCURRENCY_STOPS,
        key=pick_key,
        on_change=_slider_moved,
        args=(kind, spec.name),
        format_func=lambda n: f"{n:,}",
        help=f"Log scale, {CONCURRENCY_STOPS[0]:,} to {CONCURRENCY_STOPS[-1]:,}; the box beside it takes exact values.",
    )
    return int(exact)


def _value(kind: str, spec: Spec, where, written: set[str], memo: FormMemo) -> Any:
    """One field's value in scenario units."""
    if spec.widget == "concurrency":
        return _concurrency(kind, spec, where, written, memo)
    key = f"{kind}_{spec.name}"
    shown = _widget(kind, spec, where, from_state=key in written or not spec.bound)
    facts = facts_for(kind, spec.name)
    if shown is None and not facts.optional:  # emptied (only a box drawn without a default can be)
        return memo.last_values.get(spec.name, facts.default)
    exact = memo.exact.get(spec.name)
    if exact is not None and spec.same(shown, exact[0]):
        return exact[1]  # untouched: the exact value the link or the last plan had, not a rounded product
    return spec.from_widget(shown)


def _render_section(kind: str, section: str, values: dict[str, Any], where, written: set[str], memo: FormMemo):
    specs = [s for s in specs_for(kind) if s.section == section]
    i = 0
    while i < len(specs):
        spec = specs[i]
        if spec.column == 0 and i + 1 < len(specs) and specs[i + 1].column == 1:
            left, right = where.columns(2)
            for target, item in ((left, spec), (right, specs[i + 1])):
                values[item.name] = _value(kind, item, target, written, memo)
            i += 2
            continue
        values[spec.name] = _value(kind, spec, where, written, memo)
        i += 1


# ---------------------------------------------------------------------------------- the whole form


@dataclass
class FormResult:
    scenario: Any
    error: str | None
    link_warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(
        default_factory=list
    )  # inputs the form adjusted (a layout kept possible, a new model's formats)


def _seed_new_widgets(kind: str, seed, memo: FormMemo) -> bool:
    """Give the widgets that do not exist yet the seed's values; True when the page must rerun first.

    Scaled widgets are driven by session state and seeded there. Streamlit seeds a bound widget from the
    URL when it first exists, so where the URL does not say the seed's value (a link's corrected value, a
    scenario another page chose) the URL is rewritten and the page reruns before any widget is drawn.
    """
    ss = st.session_state
    wanted = scenario_to_query_params(seed, f"{kind}_")
    rerun = False
    for spec in specs_for(kind):
        key = f"{kind}_{spec.name}"
        if key in ss:
            continue
        value = getattr(seed, spec.name)
        if not spec.bound:
            ss[key] = spec.to_widget(value)
            memo.exact[spec.name] = (ss[key], value)
        elif st.query_params.get_all(key) != ([wanted[key]] if key in wanted else []):
            rerun = _set_param(key, wanted.get(key)) or rerun
    seed_custom = CUSTOM_SEEDS.get(kind)
    if seed_custom is not None:
        rerun = seed_custom(f"{kind}_", seed) or rerun
    return rerun


def _guide_inputs(kind: str, memo: FormMemo, written: set[str]) -> None:
    """Adjust inputs the user's last change made impossible, before their widgets are drawn (ui.guide)."""
    ss = st.session_state
    specs = {spec.name: spec for spec in specs_for(kind)}
    current = {}
    for name, spec in specs.items():
        key = f"{kind}_{name}"
        if key in ss:
            exact = memo.exact.get(name)
            shown = ss[key]
            current[name] = exact[1] if exact is not None and spec.same(shown, exact[0]) else spec.from_widget(shown)
    changed = {
        name
        for name, value in current.items()
        if name in memo.last_values and not specs[name].same(value, memo.last_values[name])
    }
    after, adjustments = guide.guide(kind, current, changed, labels_for(kind))
    base = state.remembered(kind)
    if adjustments and base is not None and state.build_scenario(kind, {**_fields(base), **after})[0] is None:
        return  # the adjustment alone would not make the plan possible (e.g. TP 3 with 64 heads): the error says why
    for adjustment in adjustments:
        key = f"{kind}_{adjustment.name}"
        ss[key] = specs[adjustment.name].to_widget(adjustment.after)
        written.add(key)
    if adjustments:
        memo.notes = (after, [a.note for a in adjustments])


def _follow_checkpoint_formats(kind: str, model: Any, memo: FormMemo, written: set[str]) -> None:
    """A newly picked model is served as its checkpoint stores it (planner.model.checkpoint_precision: an
    FP8 DeepSeek-R1 in fp8, gpt-oss with MXFP4 experts and BF16 attention, an unquantized one in bf16), as a
    scenario that names no format is; the weight widgets take those formats before they are drawn, with a
    note. The first run keeps the seed's (a link's) formats."""
    previous, memo.last_model = memo.last_model, model
    if previous is None or previous == model:
        return
    try:
        arch = resolve_model(model)
    except (PlanningError, ValueError, TypeError):
        return  # the picker's own error says what is wrong
    weights, attention = checkpoint_weight_dtypes(arch) or ("bf16", None)
    ss = st.session_state
    after = {"weight_dtype": weights, "attention_weight_dtype": attention}
    if all(ss.get(f"{kind}_{name}") == value for name, value in after.items()):
        return
    for name, value in after.items():
        ss[f"{kind}_{name}"] = value
        written.add(f"{kind}_{name}")
    served = f"{weights}" + (f", attention {attention}" if attention else "")
    stored = "as its quantization_config stores it" if arch.quantization is not None else "as its checkpoint stores it"
    memo.notes = (after, [f"Weights follow {arch.name}: {served}, {stored}. Pick another format to requantize."])


def _show_notes(kind: str, memo: FormMemo, values: dict[str, Any]) -> list[str]:
    """The adjustment notes, while the inputs are still the ones the adjustment produced."""
    if memo.notes is None:
        return []
    after, notes = memo.notes
    specs = {spec.name: spec for spec in specs_for(kind)}
    if any(not specs[name].same(values.get(name), value) for name, value in after.items() if name in specs):
        memo.notes = None
        return []
    st.info(" ".join(["**Inputs adjusted:**", *notes]), icon=":material/tune:")
    return notes


def scenario_form(
    kind: str, extra: Callable[[Any], None] | None = None, places: dict[str, Any] | None = None
) -> FormResult:
    """Draw the scenario's widgets in the sidebar and return the scenario they describe.

    Pages call this once, before anything that reads the plan. `places` maps a main-area section (MAIN_SECTIONS:
    the request stream) to the container it is drawn in; a main-area section the page does not place keeps the
    seed's value.
    """
    prefix = f"{kind}_"
    memo = form_memo(kind)
    params = _prefixed_params(prefix)
    if not memo.started and state.remembered(kind) is None and params:
        # A link opens the page: its scenario (corrected where it was wrong) and its warnings.
        seed, warnings = read_link(kind, params)
        _store_link_warnings(kind, seed, warnings)
        state.remember(kind, seed)
    memo.started = True
    seed = state.remembered(kind) or default_scenario(kind)
    if _seed_new_widgets(kind, seed, memo):
        st.rerun()
    written, memo.written = set(memo.written), set()
    _guide_inputs(kind, memo, written)

    values: dict[str, Any] = {}
    errors: list[str] = []
    side = st.sidebar
    side.markdown("#### Model")
    model, error = pickers.model_picker(prefix, seed.model, side, memo.pickers)
    errors += [error] if error else []
    if kind == "inference" and not error:
        _follow_checkpoint_formats(kind, model, memo, written)
    side.markdown("#### Hardware")
    gpu, error = pickers.gpu_picker(prefix, seed.gpu, side, memo.pickers)
    errors += [error] if error else []
    custom = CUSTOM_SECTIONS.get(kind, {})
    for section, title in SECTIONS[kind]:
        target = side
        if section in MAIN_SECTIONS[kind]:
            if places is None or section not in places:
                values[section] = getattr(seed, section)
                continue
            target = places[section]
        elif title is not None and title.startswith("▸ "):
            target = side.expander(title[2:])
        elif title is not None:
            side.markdown(f"#### {title}")
        if section in custom:
            if section in MODEL_AWARE:
                fields, error = custom[section](prefix, seed, target, model)
            else:
                fields, error = custom[section](prefix, seed, target)
            values.update(fields)
            errors += [error] if error else []
        else:
            _render_section(kind, section, values, target, written, memo)
    if extra is not None:
        extra(side)

    memo.last_values = {s.name: values[s.name] for s in specs_for(kind) if s.name in values}
    notes = _show_notes(kind, memo, values)

    if errors:
        return FormResult(None, in_labels(kind, "; ".join(errors)), pending_link_warnings(kind, None), notes)
    scenario, error = state.build_scenario(kind, {"model": model, "gpu": gpu, **values})
    if scenario is None:
        return FormResult(None, in_labels(kind, error or ""), pending_link_warnings(kind, None), notes)
    state.remember(kind, scenario)
    write_url(kind, scenario, manual_fields(kind))
    return FormResult(scenario, None, pending_link_warnings(kind, scenario), notes)
