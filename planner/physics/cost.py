"""Money: GPUs x price x time. Prices are the user's (or the catalog's reference figure)."""

from __future__ import annotations

import numpy as np

from planner.arrays import where

SECONDS_PER_HOUR = 3600.0
HOURS_PER_MONTH = 730.0  # 365 x 24 / 12


def usd_per_hour(num_gpus, usd_per_gpu_hour):
    """Cluster price per hour: every GPU in the scenario is billed, busy or not."""
    return num_gpus * usd_per_gpu_hour


def usd_per_million_tokens(cluster_usd_per_hour, tokens_per_second):
    """$ per 1M tokens at a sustained rate: hourly price / tokens per hour x 1e6 (inf when nothing flows)."""
    tokens_per_hour = tokens_per_second * SECONDS_PER_HOUR
    return where(tokens_per_hour > 0, cluster_usd_per_hour * 1e6 / np.maximum(tokens_per_hour, 1e-300), np.inf)


def replicas_for_request_rate(target_requests_per_second, requests_per_second_per_replica):
    """Smallest whole number of model replicas that sustains the target request rate."""
    return np.ceil(target_requests_per_second / requests_per_second_per_replica)


def gpu_hours(num_gpus, seconds):
    return num_gpus * seconds / SECONDS_PER_HOUR


def usd_for(num_gpus, seconds, usd_per_gpu_hour):
    """Cost of holding `num_gpus` for `seconds`."""
    return gpu_hours(num_gpus, seconds) * usd_per_gpu_hour
