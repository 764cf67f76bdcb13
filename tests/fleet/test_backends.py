"""Where the simulations run does not change the answer: this process, a process pool, Ray tasks."""

from __future__ import annotations

import os
import sys
import types

import pytest

from planner.errors import PlanningError
from planner.fleet import plan_fleet
from planner.fleet.capacity import CurveTask, candidate_key, candidate_scenario, run_task
from planner.fleet.runner import Backend, TaskRunner
from planner.fleet.scenario import FleetScenario
from tests.fleet.fleets import fleet, planned, small


def test_a_process_pool_gives_the_same_answer_byte_for_byte():
    before = dict(os.environ)
    pooled = plan_fleet(fleet(), workers=2)
    assert pooled.model_dump_json() == planned().model_dump_json()
    assert dict(os.environ) == before  # the workers' one-BLAS-thread setting is not left behind


def test_the_runner_keeps_the_tasks_order():
    scenario = FleetScenario.model_validate(fleet())
    tasks = []
    for d in scenario.deployments:
        for pool in scenario.pools:
            layout = d.candidate_layouts[0]
            tasks.append(CurveTask(candidate_key(d.name, layout, pool.name), candidate_scenario(d, layout, pool)))
    with TaskRunner(Backend(workers=2)) as runner:
        results = runner.run(tasks)
    assert [r.key for r in results] == [t.key for t in tasks]
    assert results == [run_task(t) for t in tasks]


def test_the_pool_does_not_rerun_the_caller_s_main_script(tmp_path, monkeypatch):
    """Workers start without re-running `__main__`: one that is not a runnable file (Streamlit's AppTest script in
    the same test process broke the pool on CI, 2026-12-02) or a script without a main guard must not matter."""
    script = tmp_path / "page.py"
    script.write_text("raise SystemExit('the caller script ran in a worker')\n")
    main = types.ModuleType("__main__")
    main.__file__ = str(script)
    monkeypatch.setitem(sys.modules, "__main__", main)
    assert plan_fleet(fleet(), workers=2).model_dump_json() == planned().model_dump_json()
    assert sys.modules["__main__"] is main


def test_ray_tasks_give_the_same_answer_on_a_local_instance():
    ray = pytest.importorskip("ray")
    here = plan_fleet(small())
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        on_ray = plan_fleet(small(), ray_address="auto")
    finally:
        ray.shutdown()
    assert on_ray.model_dump_json() == here.model_dump_json()


def test_without_ray_the_ray_path_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr("planner.fleet.runner.ray_available", lambda: False)
    with pytest.raises(
        PlanningError, match=r'needs the ray package, which is not installed: pip install "headroom\[cluster\]"'
    ):
        plan_fleet(fleet(), ray_address="auto")


def test_each_candidate_is_simulated_once_not_once_an_hour(monkeypatch):
    import planner.fleet.runner as runner

    ran: list[str] = []

    def counting(task):
        ran.append(type(task).__name__)
        return run_task(task)

    monkeypatch.setattr(runner, "run_task", counting)
    answer = plan_fleet(fleet())
    # 2 deployments x 1 layout x 2 pools curves, one peak check per chosen candidate, 2 packed engines: 24 hours each
    assert ran.count("CurveTask") == 4 + 2
    assert ran.count("VerifyTask") == 2
    assert len(answer.hours) == 24
