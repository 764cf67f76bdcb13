"""The power model of planner.physics.energy: idle + busy share x (board - idle), per GPU, and the kWh it makes."""

from __future__ import annotations

import numpy as np
import pytest

from planner import plan
from planner.hardware.catalog import Accelerator
from planner.inference.scenario import InferenceScenario
from planner.inference.steps import KernelGroups
from planner.physics.energy import (
    IDLE_SHARE_OF_BOARD,
    MEMORY_BOUND_ACTIVITY,
    PowerSpec,
    accelerator_power,
    energy_kwh,
    gpu_power_watts,
)
from planner.scenario import parse_scenario
from planner.search.sweep import evaluate_inference, inference_grid


def test_power_is_idle_plus_the_busy_share_of_the_span():
    # 100 W idle, 700 W board, busy 40 % of the step: 100 + 0.4 x (700 - 100) = 340 W
    assert gpu_power_watts(700.0, 100.0, 0.4) == pytest.approx(340.0)
    assert gpu_power_watts(700.0, 100.0, 0.0) == pytest.approx(100.0)
    assert gpu_power_watts(700.0, 100.0, 1.0) == pytest.approx(700.0)


def test_busy_share_is_clipped_to_zero_and_one():
    assert gpu_power_watts(700.0, 100.0, -0.5) == pytest.approx(100.0)
    assert gpu_power_watts(700.0, 100.0, 3.0) == pytest.approx(700.0)


def test_power_broadcasts_over_arrays():
    shares = np.array([-1.0, 0.0, 0.25, 1.0, 2.0])
    watts = gpu_power_watts(np.full(5, 700.0), 100.0, shares)
    assert isinstance(watts, np.ndarray)
    np.testing.assert_allclose(watts, [100.0, 100.0, 250.0, 700.0, 700.0])
    assert np.all((watts >= 100.0) & (watts <= 700.0))


def test_energy_is_watts_times_gpu_hours_times_pue():
    # 4 GPUs at 340 W for 2 h under PUE 1.2: 340 x 8 GPU-h x 1.2 / 1000 = 3.264 kWh
    assert energy_kwh(340.0, 8.0, 1.2) == pytest.approx(3.264)
    np.testing.assert_allclose(energy_kwh(np.array([100.0, 700.0]), 1.0, 1.0), [0.1, 0.7])


def test_a_custom_accelerator_without_power_figures_gets_a_stated_assumption():
    custom = Accelerator.model_validate(
        {
            "id": "custom",
            "name": "Custom",
            "memory_bytes": 1 << 34,
            "memory_bandwidth_bytes_per_second": 1e12,
            "peak_flops_per_second": {"bf16": 500e12},
        }
    )
    power = accelerator_power(custom)
    assert isinstance(power, PowerSpec)
    assert power.assumed
    assert "ASSUMED" in power.source
    # 500 TFLOP/s x 0.71 W per TFLOP/s = 354 W; idle 15 % of it
    assert power.board_watts == pytest.approx(500e12 * 700.0 / 989.4e12)
    assert power.idle_watts == pytest.approx(IDLE_SHARE_OF_BOARD * power.board_watts)


def test_a_custom_accelerator_may_state_its_power():
    custom = Accelerator.model_validate(
        {
            "id": "custom",
            "name": "Custom",
            "memory_bytes": 1 << 34,
            "memory_bandwidth_bytes_per_second": 1e12,
            "peak_flops_per_second": {"bf16": 500e12},
            "board_power_watts": 400,
            "idle_power_watts": 40,
            "power_source": "my meter",
        }
    )
    power = accelerator_power(custom)
    assert (power.board_watts, power.idle_watts, power.assumed) == (400.0, 40.0, False)
    assert power.source == "my meter"


def test_idle_at_or_above_board_is_refused():
    with pytest.raises(ValueError, match="must be below board_power_watts"):
        Accelerator.model_validate(
            {
                "id": "x",
                "name": "x",
                "memory_bytes": 1 << 30,
                "memory_bandwidth_bytes_per_second": 1e12,
                "peak_flops_per_second": {"bf16": 1e14},
                "board_power_watts": 100,
                "idle_power_watts": 100,
            }
        )


# ------------------------------------------------------------------------------ plans


def _plan(**scenario):
    return plan(parse_scenario(scenario))


def test_an_inference_plan_states_power_and_energy_per_million_tokens():
    p = _plan(kind="inference")  # Llama-3.1-70B on 4 x H100 SXM, TP 4
    e, tps = p.energy, p.performance.output_tokens_per_second
    assert (e.board_watts, e.idle_watts, e.power_assumed) == (700.0, 70.0, False)
    assert 0 < e.busy_share <= 1
    assert e.watts_per_gpu == pytest.approx(70 + e.busy_share * (700 - 70))
    assert e.deployment_watts == pytest.approx(4 * e.watts_per_gpu * 1.0)
    # kWh per 1M tokens: deployment W / 1000 x (1e6 / tokens/s) / 3600 s per hour
    assert e.kwh_per_million_output_tokens == pytest.approx(e.deployment_watts / 1000 * 1e6 / tps / 3600)
    assert e.electricity_usd_per_million_output_tokens == pytest.approx(e.kwh_per_million_output_tokens * 0.127)
    assert e.co2e_kg_per_million_output_tokens == pytest.approx(e.kwh_per_million_output_tokens * 0.39)
    assert any(a.startswith("Energy: power per GPU = idle + busy share") for a in p.assumptions)
    assert {"Power per GPU", "kWh per 1M output tokens"} <= {q.name for q in p.equations}


def test_energy_lies_between_idle_and_board_power_and_scales_with_pue():
    base = _plan(kind="inference", gpu="h200", num_gpus=8, tensor_parallel=8, concurrency=1)
    site = _plan(kind="inference", gpu="h200", num_gpus=8, tensor_parallel=8, concurrency=1, pue=1.5)
    gpu_hours = 8 * 1e6 / base.performance.output_tokens_per_second / 3600
    kwh = base.energy.kwh_per_million_output_tokens
    assert 80 * gpu_hours / 1000 <= kwh <= 700 * gpu_hours / 1000
    assert site.energy.watts_per_gpu == pytest.approx(base.energy.watts_per_gpu)
    assert site.energy.kwh_per_million_output_tokens == pytest.approx(1.5 * kwh)
    # the plan's numbers are unchanged by the site's energy figures
    assert site.cost.usd_per_million_output_tokens == base.cost.usd_per_million_output_tokens


def test_a_pipeline_stage_waits_for_the_others():
    one = _plan(kind="inference", num_gpus=4, tensor_parallel=4, pipeline_parallel=1, concurrency=1)
    two = _plan(kind="inference", num_gpus=4, tensor_parallel=2, pipeline_parallel=2, concurrency=1)
    assert two.energy.busy_share < 0.6 * one.energy.busy_share


def test_a_custom_gpu_without_power_figures_plans_with_an_assumption():
    gpu = {
        "memory_bytes": 80 * 2**30,
        "memory_bandwidth_bytes_per_second": 3e12,
        "peak_flops_per_second": {"bf16": 1e15},
    }
    p = _plan(kind="inference", gpu=gpu)
    assert p.energy.power_assumed and "ASSUMED" in p.energy.power_source
    assert p.energy.idle_watts < p.energy.watts_per_gpu <= p.energy.board_watts


def test_the_sweep_reports_the_plans_power_and_energy():
    base = parse_scenario({"kind": "inference"})
    grid = inference_grid(base, gpus=["h100-sxm", "h200", "mi300x"], concurrency=[1, 64])
    frame = evaluate_inference(base, grid)
    for row in frame.itertuples():
        p = plan(
            InferenceScenario.model_validate({**base.model_dump(), "gpu": row.gpu, "concurrency": row.concurrency})
        )
        assert row.watts_per_gpu == pytest.approx(p.energy.watts_per_gpu, rel=1e-9)
        assert row.kwh_per_million_output_tokens == pytest.approx(p.energy.kwh_per_million_output_tokens, rel=1e-9)


def test_a_training_plan_states_the_runs_energy():
    p = _plan(kind="training")  # Llama-3.1-8B on 8 x H100 SXM
    e = p.energy
    assert e.idle_watts <= e.watts_per_gpu <= e.board_watts
    hours = p.performance.time_to_train_seconds / 3600
    # 8 GPUs x W x hours x PUE / 1000
    assert e.kwh == pytest.approx(8 * e.watts_per_gpu * hours * 1.0 / 1000)
    assert e.electricity_usd == pytest.approx(e.kwh * 0.127)
    assert e.co2e_kg == pytest.approx(e.kwh * 0.39)
    assert e.kwh_per_million_tokens == pytest.approx(e.kwh / (p.performance.training_tokens / 1e6))
    assert any(a.startswith("Energy:") for a in p.assumptions)
    assert "Energy to train" in {q.name for q in p.equations}


def test_a_training_pipeline_bubble_is_idle_time():
    p = _plan(kind="training", num_gpus=8, tensor_parallel=1, pipeline_parallel=8, global_batch_size=16)
    bubble = p.performance.step_breakdown_seconds["pipeline_bubble_seconds"] / p.performance.step_seconds
    assert bubble > 0.1
    assert p.energy.busy_share == pytest.approx(1 - bubble, abs=1e-9)


def test_serving_weighs_memory_bound_time_by_measured_decode_power():
    """A memory-bound stretch counts at MEMORY_BOUND_ACTIVITY (Ma et al. 2026: decode draws 137-300 W on a 700 W
    H200); compute-bound time fully. Hand-worked on one kernel group, then a batch-1 decode plan on H200."""
    groups = KernelGroups(
        gemm_compute=1.0, gemm_memory=3.0, expert_compute=0.0, expert_memory=0.0, mixing_compute=2.0, mixing_memory=1.0
    )
    # GEMMs: 1 s of FLOPs inside 3 s (2 s memory-bound); mixing: compute-bound 2 s
    assert groups.active_seconds(MEMORY_BOUND_ACTIVITY) == pytest.approx(1.0 + 2 * MEMORY_BOUND_ACTIVITY + 2.0)
    decode_bound = plan(
        InferenceScenario(model="llama-3.1-8b", gpu="h200", num_gpus=1, tensor_parallel=1, concurrency=1)
    )
    watts = decode_bound.energy.watts_per_gpu
    assert 137 <= watts <= 300
    busier = plan(InferenceScenario(model="llama-3.1-8b", gpu="h200", num_gpus=1, tensor_parallel=1, concurrency=256))
    assert busier.energy.watts_per_gpu > watts
