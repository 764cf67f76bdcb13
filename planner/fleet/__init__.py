"""Fleet planning: several deployments over a day on GPU pools — load over the day, autoscaling, spares against
failures, a reserved/on-demand/spot mix, energy — built on the traffic simulation's per-replica SLO capacity.

    from planner.fleet import plan_fleet, manager_summary
    answer = plan_fleet(fleet_json_object, workers=4)
    print(manager_summary(answer))
"""

from planner.fleet.answer import FleetAnswer, manager_summary
from planner.fleet.export import fleet_csv, fleet_text
from planner.fleet.intake import parse_fleet
from planner.fleet.plan import plan_fleet
from planner.fleet.scenario import FleetScenario

__all__ = ["FleetAnswer", "FleetScenario", "fleet_csv", "fleet_text", "manager_summary", "parse_fleet", "plan_fleet"]
