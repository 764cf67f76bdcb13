"""A plan's energy lines, under its cost lines on the Inference and Training pages: power per GPU, what the
deployment draws, kWh, electricity $ and CO2e (per 1M output tokens for serving, for the run for training), with
the power model stated. Presentation only: every number is the plan's `energy` record (planner.physics.energy);
two significant figures, no more than a linear idle-to-board power model has."""

from __future__ import annotations

from planner import units
from ui.text import md_escape


def _power_help(e, busy_what: str) -> str:
    figures = "assumed (no published figure)" if e.power_assumed else "published"
    return (
        f"Power per GPU = idle + busy share × (board − idle) = {units.watts(e.idle_watts)} + "
        f"{e.busy_share:.2f} × ({units.watts(e.board_watts)} − {units.watts(e.idle_watts)}). The busy share is "
        f"{busy_what}. Board and idle power ({figures}): {md_escape(e.power_source)}"
    )


def _site(e) -> str:
    return (
        f"PUE {e.pue:g}, electricity {units.usd(e.electricity_usd_per_kwh)}/kWh, grid "
        f"{e.carbon_kg_per_kwh:g} kg CO2e/kWh (More settings; defaults: US averages from EIA)."
    )


def power_model_caption(group, e) -> None:
    group.caption(
        "Energy: power per GPU = idle + busy share × (board − idle), two significant figures; GPUs only (no hosts), "
        "× PUE for the site. Serving counts memory-bound time at 22 % (decode draws 137–300 W on a 700 W H200, "
        "Ma et al. 2026), training its busy time fully."
        + (" **Power figures assumed** for this GPU." if e.power_assumed else "")
    )


def inference_energy(group, plan) -> None:
    """Power per GPU, the deployment's draw, and kWh, $ and CO2e per 1M output tokens."""
    e = plan.energy
    row = group.columns(3)
    row[0].metric(
        "Power per GPU",
        units.watts(e.watts_per_gpu),
        help=_power_help(
            e,
            "the serving cycle's roofline time (kernels, collectives, hand-offs; memory-bound time at 22 %) over its wall time; launches, "
            "scheduler, sampler and other pipeline stages' turns count idle",
        )
        + f" The deployment: {plan.scenario.num_gpus} GPUs × PUE {e.pue:g} = {units.watts(e.deployment_watts)}.",
    )
    row[1].metric(
        "kWh per 1M output tokens",
        units.kwh(e.kwh_per_million_output_tokens),
        help=f"{units.watts(e.deployment_watts)} for the time 1M output tokens take at "
        f"{units.count(plan.performance.output_tokens_per_second)} tokens/s. " + _site(e),
    )
    row[2].metric(
        "Electricity per 1M output tokens",
        units.usd_approx(e.electricity_usd_per_million_output_tokens),
        help=f"{units.kg(e.co2e_kg_per_million_output_tokens)} CO2e per 1M output tokens. " + _site(e),
    )
    group.caption(
        f"Draws {units.watts(e.deployment_watts)} ({units.watts(e.watts_per_gpu)} per GPU, busy "
        f"{units.percent(e.busy_share)} of the cycle) · {units.kg(e.co2e_kg_per_million_output_tokens)} CO2e per "
        "1M output tokens."
    )
    power_model_caption(group, e)


def training_energy(group, plan) -> None:
    """Power per GPU, the cluster's draw, and the run's kWh, $ and CO2e."""
    e = plan.energy
    row = group.columns(3)
    row[0].metric(
        "Power per GPU",
        units.watts(e.watts_per_gpu),
        help=_power_help(e, "the optimizer step less its pipeline bubble and offload transfers, over the step")
        + f" The cluster: {plan.scenario.num_gpus} GPUs × PUE {e.pue:g} = {units.watts(e.cluster_watts)}.",
    )
    row[1].metric(
        "Energy to train",
        units.kwh(e.kwh),
        help=f"{units.watts(e.cluster_watts)} for {units.seconds(plan.performance.time_to_train_seconds)}; "
        f"{units.kwh(e.kwh_per_million_tokens)} per 1M tokens. " + _site(e),
    )
    row[2].metric(
        "Electricity to train",
        units.usd_approx(e.electricity_usd),
        help=f"{units.kg(e.co2e_kg)} CO2e for the run. " + _site(e),
    )
    group.caption(
        f"Draws {units.watts(e.cluster_watts)} ({units.watts(e.watts_per_gpu)} per GPU, busy "
        f"{units.percent(e.busy_share)} of a step) · {units.kg(e.co2e_kg)} CO2e for the run."
    )
    power_model_caption(group, e)
