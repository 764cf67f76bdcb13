"""Chart builders: every data mark has a tooltip, colours are the colour-blind safe palette, data attached."""

from __future__ import annotations

import altair as alt

from planner import InferenceScenario, plan
from planner.search import explore
from planner.search.roofline_points import plan_roofline
from ui import charts, palette, sweeps


def _layers(spec: dict):
    yield from spec.get("layer", [spec])


def _check(spec: dict) -> None:
    assert spec["datasets"], "chart has no data attached"
    for layer in _layers(spec):
        mark = layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"]
        if mark in ("text", "line") and "tooltip" not in layer.get("encoding", {}):
            continue  # labels and connecting lines; the points/bars under them carry the tooltip
        assert "tooltip" in layer["encoding"], f"{mark} layer without tooltip"
    alt.Chart.from_dict({**spec, "datasets": {k: v.to_dict("records") for k, v in spec["datasets"].items()}})


def test_every_chart_has_tooltips_and_valid_data():
    scenario = InferenceScenario()
    p = plan(scenario)
    mem = p.memory
    curve = sweeps.frame(explore.concurrency_sweep(scenario, concurrencies=[1, 8, 64, 512]))
    grid = sweeps.frame(explore.context_concurrency_grid(scenario, concurrencies=[1, 64], contexts=[1024, 4096]))
    specs = [
        charts.memory_bar(mem.components, mem.budget_bytes, mem.capacity_bytes),
        charts.memory_compare([("a", mem.components, mem.budget_bytes), ("b", mem.components, mem.budget_bytes)]),
        charts.roofline(plan_roofline(p)),
        charts.latency_curve(curve, 64),
        charts.heatmap(grid, (64, 4096)),
        charts.metric_bars(["a", "b"], [1.0, 2.0], ["1", "2"], "TTFT (ms)"),
        charts.stacked_time({"forward_backward_seconds": 1.0, "data_parallel_seconds": 0.1}),
    ]
    for spec in specs:
        _check(spec)


def test_memory_colours_are_okabe_ito_and_stable():
    spec = charts.memory_bar({"weights_bytes": 1e9, "kv_cache_bytes": 2e9}, 5e9, 6e9)
    scale = spec["layer"][0]["encoding"]["color"]["scale"]
    assert scale["domain"] == ["Weights", "KV cache"]
    assert scale["range"] == [palette.BLUE, palette.ORANGE]
    assert set(palette.CATEGORICAL) <= {
        "#0072B2",
        "#E69F00",
        "#009E73",
        "#CC79A7",
        "#56B4E9",
        "#D55E00",
        "#F0E442",
        "#000000",
    }


def test_sweeps_are_real_plans():
    scenario = InferenceScenario()
    frame = sweeps.frame(explore.concurrency_sweep(scenario, concurrencies=[64]))
    expected = plan(scenario).performance
    assert frame.loc[0, "tokens_per_second"] == expected.output_tokens_per_second
    assert frame.loc[0, "tpot_ms"] == expected.tpot_seconds * 1e3
