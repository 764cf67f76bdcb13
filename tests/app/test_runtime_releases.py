"""The Inference page's engine picker offers the releases, and links written with an old name or a version open
as the profile they select (issue 22, item 1)."""

from __future__ import annotations

from conftest import assert_clean, metric, open_page

from planner import InferenceScenario, plan, units
from planner.physics.runtimes import RUNTIMES


def _runtime_select(at):
    return next(s for s in at.selectbox if s.label.startswith("Serving engine"))


def test_the_picker_offers_every_release():
    at = open_page()
    assert_clean(at)
    assert set(_runtime_select(at).options) == set(RUNTIMES)


def test_old_and_versioned_links_open_as_their_profile():
    for written, profile in [("vllm-v0", "vllm@0.1"), ("vllm@0.7.3", "vllm@0.6")]:
        at = open_page(params={"inference_runtime": written})
        assert_clean(at)
        assert _runtime_select(at).value == profile
        expected = plan(InferenceScenario(runtime=profile)).performance
        assert metric(at, "Time per output token") == units.seconds(expected.tpot_seconds)
