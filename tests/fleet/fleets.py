"""Small fleets for the tests: 8B-class models, short probe streams (200 requests), a few replicas."""

from __future__ import annotations

import copy
from typing import Any

from planner.fleet import plan_fleet


def deployment(name: str, model: str = "llama-3.1-8b", **load: Any) -> dict[str, Any]:
    return {
        "name": name,
        "scenario": {
            "model": model,
            "tensor_parallel": 1,
            "num_gpus": 1,
            "prompt_tokens": 512,
            "output_tokens": 128,
            "concurrency": 64,
            "traffic": {"num_requests": 200, "slo": {"ttft_seconds": 1.0, "tpot_seconds": 0.05, "percentile": 99}},
        },
        **(load or {"diurnal": {"peak_requests_per_second": 30, "trough_requests_per_second": 5, "peak_hour": 14}}),
    }


def fleet(**changes: Any) -> dict[str, Any]:
    """Two deployments on two GPU kinds; `changes` replace top-level keys."""
    base: dict[str, Any] = {
        "kind": "fleet",
        "deployments": [
            deployment("chat"),
            deployment(
                "code",
                "qwen2.5-7b",
                rate_by_hour=[2.0] * 8 + [6.0] * 10 + [3.0] * 6,
            ),
        ],
        "pools": [
            {
                "name": "h100",
                "gpu": "h100-sxm",
                "on_demand_usd_per_hour": 3.0,
                "reserved_usd_per_hour": 2.0,
                "spot_usd_per_hour": 1.5,
                "spot_interruptions_per_day": 0.5,
                "spot_share": 0.5,
                "pue": 1.2,
            },
            {"name": "a100", "gpu": "a100-80gb", "on_demand_usd_per_hour": 2.0},
        ],
        "autoscaling": {"headroom_share": 0.1, "min_replicas": 1},
    }
    return {**copy.deepcopy(base), **changes}


def small(*extra: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """One deployment ('chat') on one pool ('h100'), plus `extra` deployments: the cheapest fleet to plan."""
    base = fleet(**changes)
    base["pools"] = base["pools"][:1] if "pools" not in changes else base["pools"]
    base["deployments"] = [base["deployments"][0], *extra] if "deployments" not in changes else base["deployments"]
    return base


_CACHE: dict[str, Any] = {}


def planned(key: str = "base", **changes: Any):
    """plan_fleet(fleet(**changes)), computed once per key for the whole session."""
    if key not in _CACHE:
        _CACHE[key] = plan_fleet(fleet(**changes))
    return _CACHE[key]
