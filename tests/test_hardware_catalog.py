"""The accelerator catalog as data: every entry loads, cites its sources, gives dense peaks no higher than the
sparse headline, says how its memory and price were obtained, and the scale-up domain reaches the plan."""

from __future__ import annotations

import json
import re

import pytest
from pydantic import ValidationError

from planner import plan
from planner.cli.main import main as cli_main
from planner.dtypes import DTYPES
from planner.hardware.catalog import (
    HARDWARE_FILE,
    Accelerator,
    catalog_problems,
    get_accelerator,
    list_accelerators,
)
from planner.inference.scenario import InferenceScenario
from planner.physics.energy import accelerator_power
from planner.search.sweep import tensor_parallel_limit
from planner.training.scenario import TrainingScenario

CATALOG = list_accelerators()
RAW = {e["id"]: e for e in json.loads(HARDWARE_FILE.read_text())["accelerators"]}
NEW_IN_ISSUE_12 = (
    "gb200-nvl72",
    "gb300-nvl72",
    "b300",
    "h20",
    "h100-nvl",
    "mi325x",
    "mi355x",
    "rtx-5090",
    "rtx-pro-6000",
    "l40",
    "rtx-a6000",
    "apple-m4-max",
    "apple-m3-ultra",
    "gaudi3",
)
NATIVE_FP4 = ("b200", "b300", "gb200-nvl72", "gb300-nvl72", "rtx-5090", "rtx-pro-6000", "mi355x")


def test_the_catalog_loads_whole():
    assert catalog_problems() == ()
    assert set(NEW_IN_ISSUE_12) <= {a.id for a in CATALOG}


@pytest.mark.parametrize("accel", CATALOG, ids=lambda a: a.id)
def test_every_entry_cites_its_figures(accel):
    # a generic placeholder says so; every product cites a page, a datasheet or the reference csv
    assert accel.source
    assert "GENERIC" in accel.notes or re.search(r"https?://|hardware\.csv|datasheet", accel.source)


@pytest.mark.parametrize("accel", CATALOG, ids=lambda a: a.id)
def test_dense_peaks_are_at_most_the_sparse_ones(accel):
    for dtype, sparse in accel.sparse_peak_flops_per_second.items():
        assert accel.peak_flops_per_second.get(dtype, 0) <= sparse
    # 2:4 sparsity doubles at most: a sparse figure entered as dense would break this too (2 % for the
    # datasheets' own rounding, e.g. L40S bf16 362.05 dense vs 733 sparse)
    for dtype, dense in accel.peak_flops_per_second.items():
        assert accel.sparse_peak_flops_per_second.get(dtype, 2 * dense) <= 2 * dense * 1.02


def test_a_sparse_figure_entered_as_dense_is_refused():
    spec = {
        "id": "x",
        "name": "x",
        "memory_bytes": 1 << 30,
        "memory_bandwidth_bytes_per_second": 1e12,
        "peak_flops_per_second": {"bf16": 2e15},
        "sparse_peak_flops_per_second": {"bf16": 1e15},
    }
    with pytest.raises(ValidationError, match="exceeds the sparse one"):
        Accelerator.model_validate(spec)


@pytest.mark.parametrize("gpu_id", NEW_IN_ISSUE_12)
def test_new_entries_say_how_memory_and_price_were_obtained(gpu_id):
    entry = RAW[gpu_id]  # the *_note fields are for readers of the data file; the schema ignores them
    assert entry["memory_bytes_note"]
    # device-visible memory: reported by the driver (nvidia-smi, torch, hl-smi) or the OS's GPU limit
    assert re.search(r"nvidia-smi|torch|hl-smi|DEVICE-VISIBLE", entry["memory_bytes_note"])
    note = entry["reference_usd_per_hour_note"]
    assert "GUESS" in note or "public" in note
    assert entry["interconnect"]["domain_size_gpus"] >= 1


def test_unified_memory_is_device_visible_not_total():
    for gpu_id, total_gib in (("apple-m4-max", 128), ("apple-m3-ultra", 512)):
        assert get_accelerator(gpu_id).memory_bytes == 0.75 * total_gib * 2**30  # macOS's default GPU limit


def test_fp4_tensor_cores_where_the_silicon_has_them():
    for accel in CATALOG:
        assert accel.supports("fp4") == (accel.id in NATIVE_FP4), accel.id
        assert accel.gemm_dtype("nvfp4") == ("fp4" if accel.id in NATIVE_FP4 else "bf16")
        assert accel.gemm_dtype("int4") == "bf16"  # weight-only by design, everywhere
        assert all(accel.gemm_dtype(d) in accel.peak_flops_per_second or accel.peak_flops(d) for d in DTYPES)
    assert get_accelerator("a100-80gb").gemm_dtype("fp8") == "bf16"
    assert get_accelerator("h100-sxm").gemm_dtype("fp8") == "fp8"


def test_nvl72_racks_are_one_72_gpu_nvlink_domain():
    for gpu_id in ("gb200-nvl72", "gb300-nvl72"):
        accel = get_accelerator(gpu_id)
        assert accel.gpus_per_node == 72
        # TP 16 stays on NVLink in the rack; on an 8-GPU HGX node it crosses the network
        inside = InferenceScenario(model="llama-3.1-405b", gpu=gpu_id, num_gpus=16, tensor_parallel=16)
        assert not any("spans more than" in w for w in plan(inside).warnings)
    hgx = InferenceScenario(model="llama-3.1-405b", gpu="b200", num_gpus=16, tensor_parallel=16)
    assert any("spans more than the 8 GPUs of a node" in w for w in plan(hgx).warnings)


def test_training_takes_the_scale_up_domain_from_the_gpu():
    rack = TrainingScenario(model="llama-3.1-70b", gpu="gb200-nvl72", num_gpus=64, tensor_parallel=16)
    assert rack.gpus_per_node is None and rack.gpus_per_node_on(rack.accelerator()) == 72
    pinned = TrainingScenario(model="llama-3.1-70b", gpu="gb200-nvl72", num_gpus=64, gpus_per_node=8)
    assert pinned.gpus_per_node_on(pinned.accelerator()) == 8
    assert tensor_parallel_limit(rack, ["h100-sxm", "gb200-nvl72"]) == 72
    assert tensor_parallel_limit(rack, ["h100-pcie"]) == 8  # TP over PCIe stays searchable


def test_cli_lists_the_new_gpus(capsys):
    assert cli_main(["gpus"]) == 0
    listed = capsys.readouterr().out
    for gpu_id in NEW_IN_ISSUE_12:
        assert re.search(rf"^{re.escape(gpu_id)}\s", listed, re.MULTILINE), gpu_id


@pytest.mark.parametrize("accel", CATALOG, ids=lambda a: a.id)
def test_every_entry_states_its_power(accel):
    # board power from a cited source; idle below it, measured or left to the energy model's stated rule
    assert accel.board_power_watts is not None and accel.board_power_watts > 0
    assert accel.power_source and re.search(r"https?://|datasheet|nvidia-smi|GENERIC|product brief", accel.power_source)
    power = accelerator_power(accel)
    assert 0 <= power.idle_watts < power.board_watts
    if accel.idle_power_watts is None:
        assert power.assumed and "ASSUMED" in power.source


def test_rack_scale_and_whole_machine_entries_say_what_their_power_covers():
    for gpu in ("gb200-nvl72", "gb300-nvl72"):
        assert "PER GPU" in get_accelerator(gpu).power_source
    for mac in ("apple-m4-max", "apple-m3-ultra"):
        assert "WHOLE-MACHINE" in get_accelerator(mac).power_source
    assert "GENERIC" in get_accelerator("cpu").power_source
