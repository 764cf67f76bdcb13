"""Running a fleet's independent simulations: here, on local cores (a process pool) or as Ray tasks.

Every backend calls the same function (`capacity.run_task`) on the same picklable tasks and returns the results in
the tasks' order, so a fleet's answer does not depend on where it ran. Ray is optional (`pip install
"headroom[cluster]"`) and imported only when a Ray address is given: "auto" (a running cluster, or the RAY_ADDRESS
environment variable's), "ray://host:10001" (Ray Client: `pip install "ray[client]"`), or "local" (start a Ray instance
on this machine). A Ray that is already initialised in this process (a notebook, a test) is used as it is.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import types
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.util import find_spec

from pydantic import BaseModel

from planner.errors import PlanningError
from planner.fleet.capacity import Task, VerifyTask, run_task

RAY_INSTALL = 'pip install "headroom[cluster]"'
# numpy's OpenBLAS starts a thread per core in every process and its idle threads spin, so N workers would run N x
# cores BLAS threads on N cores; the simulation's arrays are short, so each worker keeps one (on this machine one plan
# of the example spends ~40 % more CPU time with the default threads than with one).
WORKER_ENVIRONMENT = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@dataclass(frozen=True)
class Backend:
    """Where tasks run: `workers` local processes (1: this process), or Ray at `ray_address`."""

    workers: int = 1
    ray_address: str | None = None

    @property
    def label(self) -> str:
        if self.ray_address is not None:
            return f"Ray tasks ({self.ray_address})"
        return "this process" if self.workers <= 1 else f"a pool of {self.workers} local processes"


def ray_available() -> bool:
    return find_spec("ray") is not None


def default_workers() -> int:
    """The cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class TaskRunner:
    """Runs batches of tasks on one backend; a local process pool is started at the first batch that needs it and
    kept for the next ones (a fleet plan runs three batches: curves, peak checks, packing), then shut down on exit.

    Local processes fork from a fork server (one clean process that imports the engine once; safe beside the
    threads a server such as the dashboard's runs), or are spawned where there is none. Each gets one BLAS thread
    (`WORKER_ENVIRONMENT`)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._pool: ProcessPoolExecutor | None = None
        self._saved: dict[str, str | None] = {}

    def __enter__(self) -> TaskRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        for key, value in self._saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved = {}

    def _start_pool(self) -> ProcessPoolExecutor:
        """The worker processes, started with `WORKER_ENVIRONMENT` (where the caller has not set those variables)."""
        self._saved = {k: os.environ.get(k) for k in WORKER_ENVIRONMENT if k not in os.environ}
        os.environ.update({k: WORKER_ENVIRONMENT[k] for k in self._saved})
        if "forkserver" in multiprocessing.get_all_start_methods():
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(["planner.fleet.capacity"])
        else:
            context = multiprocessing.get_context("spawn")
        return ProcessPoolExecutor(max_workers=self.backend.workers, mp_context=context)

    def run(self, tasks: Sequence[Task]) -> list[BaseModel]:
        """Each task's result, in order."""
        if not tasks:
            return []
        if self.backend.ray_address is not None:
            return _on_ray(tasks, self.backend.ray_address)
        if self.backend.workers <= 1 or len(tasks) <= 1:
            return [run_task(t) for t in tasks]
        if self._pool is None:
            self._pool = self._start_pool()
        # the longest first, so that no worker starts a long task last
        order = sorted(range(len(tasks)), key=lambda i: -_weight(tasks[i]))
        # workers start as tasks are submitted: only then is `__main__` swapped, not while they run
        with _no_main_script():
            futures = [self._pool.submit(run_task, tasks[i]) for i in order]
        placed: list[BaseModel | None] = [None] * len(tasks)
        for i, future in zip(order, futures):
            placed[i] = future.result()
        return [r for r in placed if r is not None]


@contextmanager
def _no_main_script() -> Iterator[None]:
    """While worker processes start: a bare `__main__`, so that they do not re-run the caller's script. A spawned or
    forkserver child executes the parent's `__main__` file before its first task (multiprocessing's
    `_fixup_main_from_path`); the tasks need nothing from it, a user's script without an `if __name__ ==
    "__main__"` guard would run again in every worker, and a main that is not a runnable file (Streamlit's AppTest
    script, a notebook cell) breaks the pool."""
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


def _weight(task: Task) -> float:
    """A task's expected cost, to order a batch: a bigger model and a longer stream simulate longer."""
    s = task.scenario
    traffic = s.traffic
    requests = traffic.num_requests if traffic is not None else 1
    replicas = task.replicas if isinstance(task, VerifyTask) else 1
    return float(requests * replicas * (s.prompt_tokens + s.output_tokens))


def run_all(tasks: Sequence[Task], backend: Backend) -> list[BaseModel]:
    """Each task's result, in order, on a runner of its own."""
    with TaskRunner(backend) as runner:
        return runner.run(tasks)


def _on_ray(tasks: Sequence[Task], address: str) -> list[BaseModel]:
    if not ray_available():
        raise PlanningError(f"running on Ray needs the ray package, which is not installed: {RAY_INSTALL}")
    import ray

    if not ray.is_initialized():
        try:
            ray.init(
                address=None if address == "local" else address,
                include_dashboard=False,
                log_to_driver=False,
                logging_level=logging.ERROR,  # the answer on stdout, not Ray's start-up notes on stderr
            )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise PlanningError(f"cannot reach the Ray cluster at {address!r}: {str(exc).splitlines()[0]}") from None
    remote = ray.remote(run_task)
    return list(ray.get([remote.remote(t) for t in tasks]))
