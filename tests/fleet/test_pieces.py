"""The fleet's pieces on hand-made numbers: the load over the day, sizing, spares, pricing, the summary."""

from __future__ import annotations

import math

import pytest

from planner.fleet.demand import diurnal_rates, trace_rates
from planner.fleet.pricing import Usage, bill_pool, scale_up_gpu_hours
from planner.fleet.scenario import Layout, Pool, Spares
from planner.fleet.sizing import attainment_at, replicas_for
from planner.fleet.spares import binomial_cdf, spare_groups
from planner.units import usd_compact


def test_a_diurnal_wave_peaks_at_its_hour_and_bottoms_out_twelve_hours_later():
    rates = diurnal_rates(40.0, 8.0, 14)
    assert rates[14] == pytest.approx(40.0) and rates[2] == pytest.approx(8.0)
    assert max(rates) == rates[14] and min(rates) == rates[2]
    # 3 hours off the peak: 8 + 32 x (1 + cos(pi / 4)) / 2 = 8 + 32 x 0.853553 = 35.3137
    assert rates[11] == pytest.approx(35.3137, abs=1e-4) and rates[17] == pytest.approx(rates[11])


def test_a_rate_trace_folds_days_onto_hours_and_averages_each_hours_samples():
    rows = ["seconds,requests_per_second"]
    for h in range(24):
        rows.append(f"{h * 3600},{h}")  # day one: h requests/s at hour h
        rows.append(f"{86400 + h * 3600 + 1800},{h + 2}")  # day two, half past: h + 2
    rates = trace_rates("\n".join(rows) + "\n")
    assert rates == tuple(float(h + 1) for h in range(24))


@pytest.mark.parametrize(
    "rate, capacity, headroom, per_unit, minimum, expected",
    [
        (10.0, 2.0, 0.0, 1, 1, 5),  # 10 / 2 = 5 exactly: no sixth replica
        (10.0, 2.0, 0.1, 1, 1, 6),  # 10 / (2 x 0.9) = 5.56 -> 6
        (0.0, 2.0, 0.1, 1, 2, 2),  # no load: the minimum
        (0.0, 2.0, 0.1, 1, 0, 0),  # scale to zero
        (10.0, 2.0, 0.1, 4, 1, 8),  # 6 replicas in units of 4 (an EP group over 4 replicas) -> 8
    ],
)
def test_replicas_for_an_hour(rate, capacity, headroom, per_unit, minimum, expected):
    assert replicas_for(rate, capacity, headroom, per_unit, minimum) == expected


def test_attainment_is_read_off_the_load_curve():
    curve = ((1.0, 1.0), (2.0, 0.9), (4.0, 0.5))
    assert attainment_at(curve, 0.5) == 1.0
    assert attainment_at(curve, 3.0) == pytest.approx(0.7)  # halfway from 0.9 to 0.5
    assert attainment_at(curve, 9.0) == 0.5


def test_a_layouts_blast_radius_is_its_whole_group():
    assert Layout(tensor_parallel=4, pipeline_parallel=2).unit_gpus == 8
    wide = Layout(tensor_parallel=2, expert_parallel=8)  # experts over 4 replicas of TP2
    assert (wide.unit_gpus, wide.replicas_per_unit) == (8, 4)


def test_the_binomial_tail_matches_a_direct_sum():
    n, q = 12, 0.07
    for k in range(4):
        direct = sum(math.comb(n, j) * q**j * (1 - q) ** (n - j) for j in range(k + 1))
        assert binomial_cdf(k, n, q) == pytest.approx(direct, rel=1e-12)


def test_spares_from_failure_rates():
    # 10 groups of 8 GPUs, MTBF 1,000 GPU-hours, repair 10 h: G R / MTBF = 0.08, q = 0.08 / 1.08 = 0.0741
    policy = Spares(gpu_mtbf_hours=1000, repair_hours=10, probability=0.99)
    answer = spare_groups(policy, 10, 8, 0)
    assert answer.group_down_share == pytest.approx(0.08 / 1.08)
    k = answer.groups
    assert binomial_cdf(k, 10 + k, answer.group_down_share) >= 0.99
    assert binomial_cdf(k - 1, 10 + k - 1, answer.group_down_share) < 0.99  # the fewest that do
    assert answer.gpus == 8 * k
    # headroom that already absorbs failed groups needs fewer spares; a stricter probability more
    assert spare_groups(policy, 10, 8, 2).groups < k
    assert spare_groups(Spares(gpu_mtbf_hours=1000, repair_hours=10, probability=0.9999), 10, 8, 0).groups > k
    assert spare_groups(Spares(n_plus_k=2), 10, 8, 0).gpus == 16


def _pool(**prices) -> Pool:
    return Pool(name="p", gpu="h100-sxm", **prices)


def test_pricing_buys_the_trough_reserved_and_the_rest_on_demand_and_spot():
    pool = _pool(
        on_demand_usd_per_hour=3.0,
        reserved_usd_per_hour=2.0,
        spot_usd_per_hour=1.0,
        spot_share=0.5,
        spot_interruptions_per_day=2.4,
    )
    gpus = tuple([4] * 12 + [8] * 12)
    bill = bill_pool(pool, [Usage("a", gpus, spare_gpus=2, group_gpus=2, scale_up_hours=0.1)])
    assert bill.reserved_gpus == 6  # trough 4 + 2 spares
    assert bill.cost.reserved_usd_per_day == pytest.approx(6 * 24 * 2.0)
    # above the base: 0 for 12 hours, 4 GPUs for 12 hours, half of them spot
    assert bill.cost.spot_usd_per_day == pytest.approx(12 * 2 * 1.0)
    assert bill.cost.on_demand_usd_per_day == pytest.approx(12 * 2 * 3.0)
    # re-served: 24 spot GPU-hours x 2.4 / 24 per hour x 2 GPUs a group x (0.5 + 0.1) h = 2.88 GPU-hours on demand
    assert bill.spot_reserve_gpu_hours == pytest.approx(2.88)
    # scale-up: 4 GPUs added once a day (at 12:00) start 0.1 h early
    assert bill.scale_up_gpu_hours == pytest.approx(0.4)
    assert bill.cost.usd_per_day == pytest.approx(288 + 24 + 72 + 2.88 * 3 + 0.4 * 3)
    assert bill.usd_by_deployment["a"] == pytest.approx(bill.cost.usd_per_day)


def test_without_reserved_or_spot_prices_every_gpu_is_on_demand():
    bill = bill_pool(_pool(on_demand_usd_per_hour=3.0), [Usage("a", tuple([2] * 24), 0, 1, 0.0)])
    assert bill.reserved_gpus == 0
    assert bill.cost.on_demand_usd_per_day == pytest.approx(2 * 24 * 3.0) == bill.cost.usd_per_day


def test_two_deployments_share_a_pools_bill_at_its_blended_price():
    pool = _pool(on_demand_usd_per_hour=3.0, reserved_usd_per_hour=2.0)
    a, b = Usage("a", tuple([2] * 24), 0, 1, 0.0), Usage("b", tuple([1] * 12 + [3] * 12), 0, 1, 0.0)
    bill = bill_pool(pool, [a, b])
    assert bill.reserved_gpus == 3  # the pool's trough, not each deployment's
    assert sum(bill.usd_by_deployment.values()) == pytest.approx(bill.cost.usd_per_day)
    # both hold 48 GPU-hours, each at the pool's blended price: (3 x 24 x 2 + 2 x 12 x 3) / 96 = 2.25 $/GPU-hour
    assert bill.usd_by_deployment["a"] == pytest.approx(108.0) == bill.usd_by_deployment["b"]
    assert scale_up_gpu_hours((1, 3, 2, 2), 0.5) == pytest.approx(1.0)  # +2 at hour 1, and the wrap 2 -> 1 adds none


def test_a_peak_that_needs_more_replicas_lowers_the_capacity_for_every_hour():
    from planner.fleet.capacity import CurveResult, VerifyResult
    from planner.fleet.plan import apply_verification
    from planner.fleet.scenario import Deployment
    from planner.fleet.sizing import Candidate
    from tests.fleet.fleets import deployment

    d = Deployment.model_validate(deployment("chat"))
    curve = CurveResult(key="k", feasible=True, capacity_requests_per_second_per_replica=6.0)
    c = Candidate(d, d.own_layout, _pool(on_demand_usd_per_hour=3.0), curve, 6.0)
    met = VerifyResult(key="k", requests_per_second=30.0, planned_replicas=6, verified=True, replicas=6)
    grew = VerifyResult(key="k", requests_per_second=30.0, planned_replicas=6, verified=True, replicas=8)
    missed = VerifyResult(key="k", requests_per_second=30.0, planned_replicas=6, verified=False, replicas=None)
    (same,) = apply_verification({"chat": [c]}, [met], 0.1)["chat"]
    assert same.verified and same.capacity == 6.0 and "met every SLO target" in same.verification
    (lowered,) = apply_verification({"chat": [c]}, [grew], 0.1)["chat"]
    # 30 requests/s needed 8 replicas: 30 / (8 x 0.9) = 4.1667 per replica, so the peak is sized at 8 again
    assert lowered.capacity == pytest.approx(30 / (8 * 0.9))
    assert replicas_for(30.0, lowered.capacity, 0.1, 1, 1) == 8
    assert "needed 8 replicas, not 6" in lowered.verification
    (failed,) = apply_verification({"chat": [c]}, [missed], 0.1)["chat"]
    assert failed.verified is False and failed.capacity == 6.0 and "missed the SLO" in failed.verification


def test_a_bill_reads_to_two_or_three_significant_figures():
    assert [usd_compact(v) for v in (970.4, 3653.0, 29480.2, 212_000.0, 1_234_000.0, None)] == [
        "$970",
        "$3.7k",
        "$29k",
        "$212k",
        "$1.2M",
        "n/a",
    ]
