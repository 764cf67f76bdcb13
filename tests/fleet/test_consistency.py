"""The issue's consistency checks on a planned fleet: a month is 28-31 days of the day; the busiest hour holds at
least the quietest hour's replicas; more load never costs less; energy lies between idle and board power over the
GPU-hours; the hours' replicas meet each SLO when simulated directly."""

from __future__ import annotations

import pytest

from planner.fleet.capacity import candidate_scenario
from planner.fleet.power import pool_power
from planner.inference.traffic import TrafficEngine, probe_traffic
from tests.fleet.fleets import planned


def test_a_month_is_28_to_31_days_of_the_daily_cost():
    answer = planned()
    assert answer.usd_per_day > 0
    assert 28 * answer.usd_per_day <= answer.usd_per_month <= 31 * answer.usd_per_day
    # and the split adds up to the total (every dollar in one bucket)
    c = answer.cost
    parts = (
        c.reserved_usd_per_day
        + c.on_demand_usd_per_day
        + c.spot_usd_per_day
        + c.spot_reserve_usd_per_day
        + c.scale_up_usd_per_day
    )
    assert parts == pytest.approx(answer.usd_per_day)
    assert sum(d.usd_per_day for d in answer.deployments) == pytest.approx(answer.usd_per_day)


def test_the_busiest_hour_never_holds_fewer_replicas_than_the_quietest():
    answer = planned()
    for d in answer.deployments:
        rows = [next(r for r in h.deployments if r.deployment == d.name) for h in answer.hours]
        busiest = max(rows, key=lambda r: r.requests_per_second)
        quietest = min(rows, key=lambda r: r.requests_per_second)
        assert busiest.replicas >= quietest.replicas
        assert busiest.requests_per_second > quietest.requests_per_second
        # and replicas never fall as the rate rises, hour against hour
        ordered = sorted(rows, key=lambda r: r.requests_per_second)
        assert all(a.replicas <= b.replicas for a, b in zip(ordered, ordered[1:]))


def test_rate_scale_two_never_costs_less():
    base, doubled = planned(), planned("double", rate_scale=2.0)
    assert doubled.usd_per_day >= base.usd_per_day
    assert doubled.gpu_hours_per_day >= base.gpu_hours_per_day
    assert doubled.peak_gpus >= base.peak_gpus
    for h0, h1 in zip(base.hours, doubled.hours):
        for r0, r1 in zip(h0.deployments, h1.deployments):
            assert r1.requests_per_second == pytest.approx(2 * r0.requests_per_second)
            assert r1.replicas >= r0.replicas


def test_energy_lies_between_idle_and_board_power_over_the_gpu_hours():
    answer = planned()
    fleet = answer.scenario
    total_low = total_high = 0.0
    for pool in answer.pools:
        power = pool_power(fleet.pool(pool.name))
        # GPUs re-serving a reclaimed spot group replace the reclaimed ones: no GPU-hour of their own is powered
        gpu_hours = pool.gpu_hours_per_day - pool.spot_reserve_gpu_hours_per_day
        assert gpu_hours > 0
        low = power.idle_watts * gpu_hours * power.pue / 1000
        high = power.board_watts * gpu_hours * power.pue / 1000
        assert low <= pool.energy_kwh_per_day <= high
        assert low < pool.energy_kwh_per_day < high  # neither all idle nor all busy
        total_low, total_high = total_low + low, total_high + high
    assert total_low <= answer.energy_kwh_per_day <= total_high
    assert answer.co2e_kg_per_day == pytest.approx(answer.energy_kwh_per_day * answer.carbon_kg_per_kwh)
    assert sum(h.energy_kwh for h in answer.hours) == pytest.approx(answer.energy_kwh_per_day)
    # one hour of one deployment, by the power model's formula: GPUs x (idle + busy x (board - idle)) x PUE
    row = answer.hours[14].deployments[0]
    power = pool_power(fleet.pool(row.pool))
    watts = power.idle_watts + row.busy_share * (power.board_watts - power.idle_watts)
    assert row.energy_kwh == pytest.approx(row.gpus * watts * power.pue / 1000)
    assert 0 < row.busy_share < 1


@pytest.mark.parametrize("which", ["peak", "trough", "shoulder"])
def test_the_hours_replicas_meet_each_slo_when_simulated_directly(which):
    answer = planned()
    fleet = answer.scenario
    for d in answer.deployments:
        deployment = next(x for x in fleet.deployments if x.name == d.name)
        rows = [next(r for r in h.deployments if r.deployment == d.name) for h in answer.hours]
        ordered = sorted(rows, key=lambda r: r.requests_per_second)
        row = {"peak": ordered[-1], "trough": ordered[0], "shoulder": ordered[len(ordered) * 3 // 4]}[which]
        assert row.slo_met
        layout = next(x for x in deployment.candidate_layouts if x.label == d.layout)
        engine = TrafficEngine.of(candidate_scenario(deployment, layout, fleet.pool(row.pool)))
        requests = 200 * row.replicas
        stream = probe_traffic(engine.traffic, row.requests_per_second, requests, grow=True)
        result = engine.simulate(stream, row.replicas)
        assert result.slo and all(check.met for check in result.slo), (d.name, which, result.slo)
