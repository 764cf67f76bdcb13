"""The scenario widgets (ui.controls): ranges from the fields, guided inputs, the concurrency pair, own models,
share links, and no duplicate-value warning from Streamlit."""

from __future__ import annotations

import json
import logging
import math
import typing

import annotated_types
import pytest
from conftest import APP, assert_clean, metric, open_page, warnings_text
from streamlit.elements.lib import policies
from streamlit.testing.v1 import AppTest

import planner.model.hub as hub
from planner import InferenceScenario, plan
from planner.model.catalog import load_catalog_config
from planner.share import scenario_to_query_params
from planner.training.scenario import TrainingScenario
from tests.hub_fakes import FakeFetcher
from ui import form_specs

CLASSES = {"inference": InferenceScenario, "training": TrainingScenario}


# ------------------------------------------------------------------------------ ranges from the fields


def pydantic_bounds(cls: type, name: str) -> dict[str, typing.Any]:
    """The field's ge/gt/le/lt, read straight from its metadata (not through ui.specs)."""
    out = {}
    for item in cls.model_fields[name].metadata:
        for attr in ("ge", "gt", "le", "lt"):
            if isinstance(item, getattr(annotated_types, attr.capitalize())):
                out[attr] = getattr(item, attr)
    return out


def widget_of(at: AppTest, kind: str, spec) -> typing.Any:
    key = f"{kind}_{spec.name}"
    getter = {
        "number": at.number_input,
        "concurrency": at.number_input,
        "slider": at.slider,
        "select": at.selectbox,
        "toggle": at.toggle,
        "text": at.text_input,
        "textarea": at.text_area,
        "multiselect": at.multiselect,
    }[spec.widget]
    return getter(key=key)


@pytest.mark.parametrize("kind", ["inference", "training"])
def test_every_widget_offers_exactly_its_fields_range_default_and_help(kind):
    at = open_page(kind)
    assert_clean(at)
    cls = CLASSES[kind]
    for spec in form_specs.specs_for(kind):
        info = cls.model_fields[spec.name]
        widget = widget_of(at, kind, spec)
        proto = widget.proto
        bounds = pydantic_bounds(cls, spec.name)
        if spec.widget in ("number", "concurrency", "slider"):
            low = proto.min * spec.scale
            high = proto.max * spec.scale
            if "ge" in bounds:
                assert low == bounds["ge"], spec.name
            else:  # gt: the widget's minimum is the first value above the bound
                below = proto.min - 1 if isinstance(bounds["gt"], int) else math.nextafter(proto.min, -math.inf)
                assert low > bounds["gt"] >= below * spec.scale, spec.name
            assert high == bounds["le"], spec.name
        elif spec.widget == "select":
            args = typing.get_args(info.annotation)
            optional = type(None) in args
            if optional:  # Literal[...] | None: the empty choice first, shown by its placeholder
                (literal,) = [a for a in args if a is not type(None)]
                args = (None, *typing.get_args(literal))
            expected = args if args else tuple(range(bounds["ge"], bounds["le"] + 1))
            shown = [form_specs.PLACEHOLDERS[spec.name] if o is None else str(o) for o in expected]
            assert shown == widget.options, spec.name
            assert proto.default == list(expected).index(info.default), spec.name
        elif spec.widget == "multiselect":  # a comma-separated text field: its choices, its default picked
            choices = info.json_schema_extra["choices"]  # type: ignore[index]
            assert widget.options == list(choices), spec.name
            assert ",".join(widget.value) == info.default, spec.name
        elif spec.widget in ("text", "textarea"):
            assert proto.max_chars == next(m.max_length for m in info.metadata if hasattr(m, "max_length"))
        if spec.bound and spec.widget != "select":
            default = info.default
            shown = widget.value if default is None else proto.default
            shown = shown[0] if spec.widget == "slider" else shown  # a slider's default is a list (a range)
            assert shown == default, spec.name
        if info.description:
            assert proto.help.lower().startswith(info.description[:40].lower()), spec.name


@pytest.mark.parametrize("kind", ["inference", "training"])
def test_every_scenario_field_has_one_widget_or_picker_and_reaches_the_url(kind):
    # The form builds the scenario from its widgets alone: a field without one would be dropped from links.
    fields = set(CLASSES[kind].model_fields) - {"kind"}
    specs = [spec.name for spec in form_specs.specs_for(kind)]
    manual = set(form_specs.MANUAL_FIELDS + form_specs.EXTRA_MANUAL[kind])
    assert len(specs) == len(set(specs))
    assert set(specs) | manual == fields
    # Bound widgets are in the URL through Streamlit; the rest this module writes.
    unbound = {spec.name for spec in form_specs.specs_for(kind) if not spec.bound}
    assert set(form_specs.manual_fields(kind)) == manual | unbound


# ------------------------------------------------------------------------------ no duplicate warning


class Recorder(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def duplicate_warnings():
    """Streamlit's 'default value but also set via Session State' messages about this module's widgets."""
    recorder = Recorder()
    logger = logging.getLogger("streamlit.elements.lib.policies")
    logger.addHandler(recorder)

    def collected() -> list[str]:
        return [m for m in recorder.messages if 'key "inference_' in m or 'key "training_' in m]

    yield collected
    logger.removeHandler(recorder)


def run(target: typing.Any) -> None:
    """Run the app (`target`: the AppTest or a widget just set), letting Streamlit warn again."""
    policies._shown_default_value_warning = False  # Streamlit logs the warning once per process otherwise
    target.run()


def test_no_widget_gets_a_default_and_a_session_state_value_in_the_same_run(duplicate_warnings):
    policies._shown_default_value_warning = False
    at = open_page()
    at.number_input(key="inference_num_gpus").set_value(8)
    run(at.number_input(key="inference_tensor_parallel").set_value(8))
    run(at.number_input(key="inference_num_gpus").set_value(4))  # TP written back to 4
    run(at.select_slider(key="inference_pick_concurrency").set_value(1024))  # the box follows the slider
    run(at.number_input(key="inference_concurrency").set_value(100))  # the slider follows the box
    run(at.switch_page("app_pages/training.py"))
    run(at.number_input(key="training_num_gpus").set_value(256))  # global batch written
    run(at.switch_page("app_pages/inference.py"))
    assert not at.exception
    policies._shown_default_value_warning = False
    open_page(params={"inference_tensor_parallel": "3", "inference_concurrency": "32"})  # link corrected
    policies._shown_default_value_warning = False
    seeded = AppTest.from_file(str(APP), default_timeout=60)
    seeded.session_state["current_inference"] = InferenceScenario(num_gpus=8, tensor_parallel=8, concurrency=32)
    run(seeded)  # widgets that start away from their defaults
    assert duplicate_warnings() == []


# ------------------------------------------------------------------------------ guiding inputs


def test_lowering_gpus_below_tp_lowers_tp_instead_of_blanking_the_page():
    at = open_page()
    at.number_input(key="inference_num_gpus").set_value(8)
    at.number_input(key="inference_tensor_parallel").set_value(8).run()
    at.number_input(key="inference_num_gpus").set_value(4).run()
    assert_clean(at)
    assert at.number_input(key="inference_tensor_parallel").value == 4
    assert at.session_state["current_inference"] == InferenceScenario(num_gpus=4, tensor_parallel=4)
    assert any("TP (tensor) lowered from 8 to 4 to fit 4 GPUs" in i.value for i in at.info)
    assert metric(at, "Max concurrency") == f"{plan(InferenceScenario()).memory.max_concurrency:,}"
    # The written value reached the URL, and the URL describes the plan on screen.
    assert at.query_params.get("inference_tensor_parallel") in (None, "4")


def test_256_gpus_with_the_default_global_batch_plan():
    at = open_page("training")
    at.number_input(key="training_num_gpus").set_value(256).run()
    assert_clean(at)
    scenario = at.session_state["current_training"]
    assert (scenario.num_gpus, scenario.global_batch_size) == (256, 256)
    assert at.number_input(key="training_global_batch_size").value == 256
    assert any("Global batch rounded from 64 to 256" in i.value for i in at.info)
    assert at.query_params["training_global_batch_size"] == "256"


def test_typing_the_micro_batch_the_page_suggests_is_accepted():
    at = open_page("training")
    at.number_input(key="training_sequence_length").set_value(1024).run()  # short sequences: room for more
    suggested = int(metric(at, "Largest micro-batch that fits"))
    assert suggested > 1  # the default job leaves room; otherwise this test would not exercise anything
    at.number_input(key="training_micro_batch_size").set_value(suggested).run()
    assert_clean(at)
    scenario = at.session_state["current_training"]
    per_step = suggested * 8  # micro-batch x DP, DP = 8 GPUs / (TP 1 x PP 1 x CP 1)
    assert scenario.micro_batch_size == suggested
    assert scenario.global_batch_size % per_step == 0
    assert abs(scenario.global_batch_size - 64) <= per_step / 2  # the nearest multiple of 64


def test_remaining_errors_name_the_inputs_by_their_labels():
    at = open_page()
    at.number_input(key="inference_tensor_parallel").set_value(3).run()
    text = " ".join(e.value for e in at.error)
    assert "TP (tensor) = 3 does not divide" in text and "tensor_parallel" not in text
    assert at.number_input(key="inference_num_gpus").value == 4  # 3 GPUs would not make TP 3 possible either
    at = open_page("training")
    at.toggle(key="training_offload_parameters").set_value(True).run()
    text = " ".join(e.value for e in at.error)
    assert "Offload parameters to CPU needs ZeRO stage 3" in text and "zero_stage" not in text


# ------------------------------------------------------------------------------ concurrency


def test_the_concurrency_slider_and_box_hold_one_value():
    at = open_page()
    at.select_slider(key="inference_pick_concurrency").set_value(1024).run()
    assert at.number_input(key="inference_concurrency").value == 1024
    assert at.session_state["current_inference"].concurrency == 1024
    assert at.query_params["inference_concurrency"] == "1024"  # written by the page, so AppTest sees it
    # Exact values stay exact; the slider shows the nearest stop on a log scale:
    # ln 100 = 4.61 is nearer ln 96 = 4.56 than ln 128 = 4.85; ln 3000 = 8.01 is nearer ln 3072 = 8.03.
    for exact, stop in ((100, 96), (3000, 3072), (1, 1)):
        at.number_input(key="inference_concurrency").set_value(exact).run()
        assert at.select_slider(key="inference_pick_concurrency").value == stop
        assert at.session_state["current_inference"].concurrency == exact
    assert form_specs.CONCURRENCY_STOPS[0] == 1 and form_specs.CONCURRENCY_STOPS[-1] == 8192


# ------------------------------------------------------------------------------ own models


def own_model_page() -> AppTest:
    at = open_page()
    at.radio(key="inference_pick_model_source").set_value("Upload").run()
    return at


def test_a_pasted_config_plans_and_a_bad_paste_clears_the_plan():
    config = load_catalog_config("qwen2.5-7b")
    at = own_model_page()
    at.text_area(key="inference_pick_config_text").set_value(json.dumps(config)).run()
    assert_clean(at)
    assert at.session_state["current_inference"].model == config
    assert at.metric  # a plan is shown
    at.text_area(key="inference_pick_config_text").set_value("{not json").run()
    assert not at.exception
    assert any("not valid JSON" in e.value for e in at.error)
    assert not at.metric  # no stale plan of the previous model under the error


def test_a_bad_upload_after_a_good_one_clears_the_plan():
    at = own_model_page()
    good = json.dumps(load_catalog_config("qwen2.5-7b")).encode()
    at.file_uploader(key="inference_pick_config_file").set_value(("config.json", good, "application/json")).run()
    assert at.metric
    at.file_uploader(key="inference_pick_config_file").set_value(("broken.json", b"[1, 2]", "application/json"))
    at.run()
    assert any("broken.json" in e.value and "JSON object" in e.value for e in at.error)
    assert not at.metric


def test_a_hugging_face_id_in_the_catalog_resolves_and_others_are_explained(monkeypatch):
    at = own_model_page()
    at.text_input(key="inference_pick_hub_id").set_value("Qwen/Qwen2.5-7B").run()
    assert_clean(at)
    assert at.session_state["current_inference"].model == "qwen2.5-7b"
    # Any other id is imported from the Hub (tests/app/test_hub_import.py); here the Hub says it is not there.
    missing = hub.not_found_message(hub.parse_hub_ref("someone/private-model"))
    monkeypatch.setattr(hub, "DEFAULT_FETCHER", FakeFetcher(config_error=missing))
    at.text_input(key="inference_pick_hub_id").set_value("someone/private-model").run()
    assert not at.exception
    assert any("someone/private-model was not found on the Hugging Face Hub" in e.value for e in at.error)
    assert not at.metric
    at.text_input(key="inference_pick_hub_id").set_value("not an id").run()
    assert any("is not a Hugging Face model id" in e.value for e in at.error)


# ------------------------------------------------------------------------------ links and seeds


def test_a_corrected_link_is_corrected_in_the_url_too():
    at = open_page(params={"inference_tensor_parallel": "3", "inference_concurrency": "32"})
    assert not at.exception
    assert "inference_tensor_parallel" in warnings_text(at)
    assert at.number_input(key="inference_tensor_parallel").value == 4
    assert at.query_params == {"inference_concurrency": "32"}


def test_a_scenario_from_another_page_reaches_the_widgets_and_the_url():
    scenario = InferenceScenario(num_gpus=8, tensor_parallel=8, concurrency=32, weight_dtype="fp8")
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.session_state["current_inference"] = scenario
    at.run()
    assert_clean(at)
    assert at.number_input(key="inference_tensor_parallel").value == 8
    assert at.selectbox(key="inference_weight_dtype").value == "fp8"
    assert at.session_state["current_inference"] == scenario
    assert at.query_params == scenario_to_query_params(scenario, "inference_")


def test_a_trade_offs_link_hands_its_scenario_to_the_inference_page():
    scenario = InferenceScenario(num_gpus=8, tensor_parallel=8, concurrency=48)
    at = open_page("tradeoffs", scenario_to_query_params(scenario, "inference_"))
    at.switch_page("app_pages/inference.py").run()
    assert_clean(at)
    assert at.number_input(key="inference_concurrency").value == 48
    assert at.session_state["current_inference"] == scenario
