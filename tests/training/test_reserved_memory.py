"""Allocated vs reserved training memory (issue 24, item 5): the plan's memory is the allocated peak; beside it the
caching allocator's likely reserved peak (GMLake's measured fragmentation), which a torchtitan 'max_reserved' log
reads, and a warning when only the allocated peak fits."""

from __future__ import annotations

import pytest

from planner import plan
from planner.inference.scenario import InferenceScenario
from planner.physics.memory import ALLOCATOR_FRAGMENTATION_SHARE, ALLOCATOR_FRAGMENTATION_SHARE_HIGH, reserved_bytes
from planner.training.scenario import TrainingScenario


def test_reserved_is_the_allocated_peak_over_one_less_the_fragmentation_share():
    m = plan(TrainingScenario()).memory
    assert m.reserved_bytes == pytest.approx(m.total_bytes / 0.85)
    assert m.reserved_bytes_high == pytest.approx(m.total_bytes / 0.67)
    assert reserved_bytes(85.0) == pytest.approx(100.0)
    assert ALLOCATOR_FRAGMENTATION_SHARE < ALLOCATOR_FRAGMENTATION_SHARE_HIGH < 1


@pytest.mark.parametrize(("sequence_length", "warned"), [(2048, False), (4096, True)])
def test_a_plan_whose_tensors_fit_but_whose_reserved_peak_does_not_is_warned(sequence_length, warned):
    """Llama 3.1 8B on 8 x H100: 55.4 GiB allocated reserves ~65 GiB (fits); 68.6 GiB reserves ~80.7 GiB, past
    the device's 79.6 GiB."""
    p = plan(TrainingScenario(sequence_length=sequence_length))
    m = p.memory
    assert m.fits and (m.reserved_bytes > m.capacity_bytes) == warned
    assert ("fragmentation_risk" in p.warning_codes) == warned
    if warned:
        text = p.warnings[p.warning_codes.index("fragmentation_risk")]
        assert "GMLake" in text and "expandable_segments" in text


def test_inference_memory_has_no_reserved_estimate():
    assert plan(InferenceScenario()).memory.reserved_bytes is None
