"""The power model of planner.physics.energy: idle + busy share x (board - idle), per GPU, and the kWh it makes."""

from __future__ import annotations

import numpy as np
import pytest

from planner.hardware.catalog import Accelerator
from planner.physics.energy import (
    IDLE_SHARE_OF_BOARD,
    PowerSpec,
    accelerator_power,
    energy_kwh,
    gpu_power_watts,
)


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
