"""A fleet from a JSON object, keeping what can be planned: a bad deployment or pool is left out with a sentence
instead of failing the whole fleet (`FleetScenario.model_validate` stays strict, for the schema and the tests)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from planner.errors import PlanningError, explain
from planner.fleet.answer import Rejected
from planner.fleet.scenario import MAX_DEPLOYMENTS, MAX_POOLS, Deployment, FleetScenario, Pool
from planner.scenario_base import revised


def _entries(data: dict[str, Any], key: str, limit: int) -> list[Any]:
    entries = data.get(key)
    if not isinstance(entries, list) or not entries:
        raise PlanningError(f"a fleet needs a non-empty list of {key}")
    if len(entries) > limit:
        raise PlanningError(f"a fleet holds at most {limit} {key}; this one has {len(entries)}")
    return entries


def _name(entry: Any, key: str, index: int) -> str:
    name = entry.get("name") if isinstance(entry, dict) else None
    return name if isinstance(name, str) and name else f"{key}[{index}]"


def parse_fleet(data: Any) -> tuple[FleetScenario, list[Rejected]]:
    """The fleet's valid deployments and pools, and a `Rejected` (one sentence) for each that is not. Raises
    PlanningError when nothing can be planned (no valid pool or deployment, or invalid fleet-wide settings)."""
    if not isinstance(data, dict):
        raise PlanningError("a fleet is a JSON object with deployments and pools")
    if data.get("kind", "fleet") != "fleet":
        raise PlanningError(f"expected kind 'fleet', got {data.get('kind')!r}")
    rejected: list[Rejected] = []
    pools: list[Pool] = []
    for index, entry in enumerate(_entries(data, "pools", MAX_POOLS)):
        try:
            pools.append(Pool.model_validate(entry))
        except (ValidationError, PlanningError) as exc:
            rejected.append(Rejected(what="pool", name=_name(entry, "pools", index), why=explain(exc)))
    if not pools:
        raise PlanningError(f"no pool can be planned: {'; '.join(r.why for r in rejected)}")
    known = {p.name for p in pools}
    dropped = {r.name for r in rejected}
    deployments: list[Deployment] = []
    for index, entry in enumerate(_entries(data, "deployments", MAX_DEPLOYMENTS)):
        name = _name(entry, "deployments", index)
        try:
            deployment = Deployment.model_validate(entry)
        except (ValidationError, PlanningError) as exc:
            rejected.append(Rejected(what="deployment", name=name, why=explain(exc)))
            continue
        unknown = [p for p in deployment.pools if p not in known and p not in dropped]
        kept = tuple(p for p in deployment.pools if p in known)
        if unknown:
            why = (
                f"names unknown pool(s) {', '.join(repr(p) for p in unknown)}; the pools are "
                f"{', '.join(repr(p) for p in sorted(known))}"
            )
            rejected.append(Rejected(what="deployment", name=name, why=why))
            continue
        if deployment.pools and not kept:
            why = f"its pool(s) {', '.join(deployment.pools)} were left out (see the rejected pools)"
            rejected.append(Rejected(what="deployment", name=name, why=why))
            continue
        if kept != deployment.pools:
            deployment = revised(deployment, pools=kept)
        deployments.append(deployment)
    if not deployments:
        raise PlanningError(f"no deployment can be planned: {'; '.join(r.why for r in rejected)}")
    rest = {k: v for k, v in data.items() if k not in ("deployments", "pools")}
    fleet = FleetScenario.model_validate({**rest, "deployments": deployments, "pools": pools})
    return fleet, rejected
