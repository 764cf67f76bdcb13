"""Training page: renders, matches the engine, and round-trips its scenario through the URL."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from conftest import assert_clean, metric, open_page, warnings_text

from planner import plan, units
from planner.search.fixes import suggest_fixes
from planner.share import query_params_to_scenario, scenario_to_query_params
from planner.training.scenario import RECOMPUTE_MODULES, LoraConfig, TrainingScenario
from planner.verdict import memory_verdict


def verdict_text(at, expected) -> str:
    """The verdict box: its colour follows the engine's memory verdict over the whole likely range."""
    status = memory_verdict(expected).status
    box = {"met": at.success, "at_risk": at.warning, "missed": at.error}[status]
    return next(b.value for b in box if "GPU memory" in b.value)


def assert_metrics_match(at, scenario: TrainingScenario) -> None:
    expected = plan(scenario)
    perf, cost, mem = expected.performance, expected.cost, expected.memory
    assert metric(at, "Step time") == units.seconds(perf.step_seconds)
    assert metric(at, "Tokens/s") == units.count(perf.tokens_per_second)
    assert metric(at, "MFU") == units.percent(perf.mfu, 1)
    assert metric(at, "Time to train") == units.seconds(perf.time_to_train_seconds)
    assert metric(at, "Cost to train") == units.usd(cost.usd_total)
    assert metric(at, "Largest micro-batch that fits") == str(mem.max_micro_batch_size or 0)
    assert units.gib(mem.total_bytes) in verdict_text(at, expected)
    energy = expected.energy  # two significant figures, beside the cost lines
    assert metric(at, "Power per GPU") == units.watts(energy.watts_per_gpu)
    assert metric(at, "Energy to train") == units.kwh(energy.kwh)
    assert metric(at, "Electricity to train") == units.usd_approx(energy.electricity_usd)
    assert any(units.kg(energy.co2e_kg) + " CO2e for the run" in c.value for c in at.caption)


def test_default_training_page_is_the_engine_default():
    at = open_page("training")
    assert_clean(at)
    assert at.session_state["current_training"] == TrainingScenario()
    assert_metrics_match(at, TrainingScenario())
    assert len(at.get("vega_lite_chart")) == 2  # memory breakdown and step-time breakdown
    assert any(e.label.startswith("How each number is computed") for e in at.expander)


def test_widgets_replan():
    at = open_page("training")
    at.number_input(key="training_global_batch_size").set_value(128)
    at.selectbox(key="training_zero_stage").set_value(3)
    at.selectbox(key="training_activation_checkpointing").set_value("full").run()
    assert_clean(at)
    expected = TrainingScenario(global_batch_size=128, zero_stage=3, activation_checkpointing="full")
    assert at.session_state["current_training"] == expected
    assert_metrics_match(at, expected)


def test_scaled_inputs_and_lora_round_trip_exactly():
    scenario = TrainingScenario(
        model="llama-3.1-8b",
        num_gpus=16,
        tensor_parallel=2,
        zero_stage=2,
        optimizer="adam8bit",
        global_batch_size=256,
        micro_batch_size=2,
        sequence_length=2048,
        training_tokens=2.5e9,
        inter_node_bandwidth_bytes_per_second=4e11,
        lora=LoraConfig(rank=8, target_modules=("q", "v")),
        decision="LoRA on q/v keeps it on 2 nodes",
    )
    at = open_page("training", scenario_to_query_params(scenario, "training_"))
    assert_clean(at)
    assert "link had problems" not in warnings_text(at), warnings_text(at)
    assert at.session_state["current_training"] == scenario
    assert at.number_input(key="training_training_tokens").value == 2.5
    assert at.toggle(key="training_pick_lora").value is True
    assert_metrics_match(at, scenario)


def test_invalid_training_params_warn_by_name():
    at = open_page(
        "training",
        {
            "training_zero_stage": "7",
            "training_precision": "fp4",
            "training_micro_batch_size": "0",
            "training_lora": "cfg:garbage",
        },
    )
    assert not at.exception
    text = warnings_text(at)
    for name in ("training_zero_stage", "training_precision", "training_micro_batch_size", "training_lora"):
        assert name in text, name
    assert at.session_state["current_training"] == TrainingScenario()
    assert_metrics_match(at, TrainingScenario())


def test_impossible_batch_is_explained():
    # 60 is not a multiple of micro-batch x DP = 1 x 8: the page rounds it to the nearest multiple, 64, and says so.
    at = open_page("training")
    at.number_input(key="training_global_batch_size").set_value(60).run()
    assert_clean(at)
    assert at.session_state["current_training"].global_batch_size == 64
    assert any("Global batch rounded from 60 to 64" in i.value for i in at.info)


def test_headline_metrics_show_their_likely_range():
    from planner.export import plans_to_csv
    from ui import bands

    # 5,120-token sequences: 75.2 GiB fits the 79.6 GiB budget, the likely top (81.7 GiB) does not
    scenario = TrainingScenario(sequence_length=5120)
    at = open_page("training", scenario_to_query_params(scenario, "training_"))
    expected = plan(scenario)
    shown = [m.delta for m in at.metric]
    for label, text in bands.training_texts(expected).items():
        if label != "Memory per GPU":
            assert text in shown, label
    band = expected.uncertainty["performance.step_seconds"]
    assert (
        bands.likely(expected, "performance.step_seconds", units.seconds)
        == f"likely {bands.span(band.low, band.high, units.seconds)}"
    )
    assert memory_verdict(expected).status == "at_risk"
    assert bands.memory(expected) in verdict_text(at, expected)
    header = plans_to_csv([expected]).splitlines()[0].split(",")
    assert "uncertainty.performance.step_seconds.low" in header and "uncertainty.memory.total_bytes.high" in header


def test_a_job_that_does_not_fit_keeps_its_cost_out_of_plain_sight():
    scenario = TrainingScenario(micro_batch_size=8)
    expected = plan(scenario)
    assert not expected.memory.fits
    at = open_page("training", scenario_to_query_params(scenario, "training_"))
    assert not at.exception
    assert_metrics_match(at, scenario)
    assert verdict_text(at, expected).startswith("**Does not fit in GPU memory:**")
    markdown = "\n".join(m.value for m in at.markdown)
    assert "If it fit" in markdown
    rows = "\n".join(m.value for m in at.markdown)
    assert "**Suggestions that fix the plan**" in rows
    largest = expected.memory.max_micro_batch_size
    assert largest and f"**micro-batch {largest}** · technique" in rows  # the plan's own largest that fits
    urls = [b.proto.url for b in at.get("link_button") if b.proto.label == "Open"]
    assert len(urls) == len(suggest_fixes(scenario).items) >= 2
    for url in urls:
        alternative, warnings = query_params_to_scenario(parse_qs(urlsplit(url).query), "training", "training_")
        assert warnings == [] and alternative != scenario
        assert plan(alternative).memory.fits, url


def test_efficiency_controls_replan_like_the_engine():
    """The issue-13 training options are sidebar widgets whose ranges and help come from the scenario's fields,
    and choosing them changes the plan exactly as plan() does: FP8 with Megatron's layernorm + mlp selective
    recomputation, then uneven pipeline stages (Llama 3 405B: 7 / 8 x 14 / 7)."""
    at = open_page("training")
    layers = at.number_input(key="training_recompute_num_layers")
    assert (layers.min, layers.max) == (1, 1024)
    assert "group" in layers.help and "block" in layers.help
    modules = at.multiselect(key="training_recompute_modules")
    assert "Megatron" in modules.help
    assert modules.options == list(RECOMPUTE_MODULES) and modules.value == ["core_attn"]
    assert "op" in at.selectbox(key="training_activation_checkpointing").options
    assert "fp8" in at.selectbox(key="training_precision").options
    assert at.number_input(key="training_first_pipeline_stage_layers").value is None
    assert at.number_input(key="training_first_pipeline_stage_layers").placeholder == "even split"

    at.selectbox(key="training_precision").set_value("fp8")
    at.selectbox(key="training_activation_checkpointing").set_value("selective")
    at.multiselect(key="training_recompute_modules").set_value(["mlp", "layernorm"]).run()
    assert_clean(at)
    expected = TrainingScenario(
        precision="fp8", activation_checkpointing="selective", recompute_modules="layernorm,mlp"
    )
    assert at.session_state["current_training"] == expected
    assert at.query_params["training_recompute_modules"] == "layernorm,mlp"  # the share link's own text
    assert_metrics_match(at, expected)
    before = plan(TrainingScenario())
    assert plan(expected).performance.step_seconds != before.performance.step_seconds
    # ... and a link with a module list opens with those modules picked
    at = open_page("training", scenario_to_query_params(expected, "training_"))
    assert_clean(at)
    assert at.multiselect(key="training_recompute_modules").value == ["layernorm", "mlp"]
    assert at.session_state["current_training"] == expected

    # uneven stages arrive through a link; the stage widgets show them and moving one replans
    s405 = TrainingScenario(
        model="llama-3.1-405b",
        num_gpus=128,
        tensor_parallel=8,
        pipeline_parallel=16,
        global_batch_size=16,
        first_pipeline_stage_layers=7,
        last_pipeline_stage_layers=7,
    )
    at = open_page("training", scenario_to_query_params(s405, "training_"))
    assert_clean(at)
    assert at.session_state["current_training"] == s405
    assert at.number_input(key="training_first_pipeline_stage_layers").value == 7
    assert plan(s405).layout.heaviest_stage == "middle"
    assert_metrics_match(at, s405)
    at.number_input(key="training_first_pipeline_stage_layers").set_value(6)
    at.number_input(key="training_last_pipeline_stage_layers").set_value(None).run()
    assert_clean(at)
    moved = TrainingScenario(
        **{**s405.model_dump(), "first_pipeline_stage_layers": 6, "last_pipeline_stage_layers": None}
    )
    assert at.session_state["current_training"] == moved
    assert_metrics_match(at, moved)


def test_the_training_page_says_which_memory_it_shows():
    """Issue 24 item 5: the plan's memory is the allocated peak; the caption gives the likely reserved peak too."""
    at = open_page("training")
    assert not at.exception
    caption = "\n".join(c.value for c in at.caption)
    assert "max_memory_allocated" in caption and "max_reserved" in caption and "GMLake" in caption


def test_mxfp8_off_blackwell_is_a_sentence_and_on_blackwell_a_plan():
    at = open_page("training")
    at.selectbox(key="training_precision").set_value("fp8")
    at.selectbox(key="training_fp8_recipe").set_value("mxfp8").run()
    assert not at.exception
    assert any("needs a Blackwell GPU" in e.value for e in at.error)
    at.selectbox(key="training_pick_gpu").set_value("b200").run()
    assert_clean(at)
    expected = at.session_state["current_training"]
    assert (expected.gpu_id(), expected.fp8_recipe) == ("b200", "mxfp8")
    assert_metrics_match(at, expected)
