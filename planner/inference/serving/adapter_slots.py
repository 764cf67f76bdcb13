"""One replica's LoRA adapters while it serves (`planner.inference.adapters`): which adapters the running requests
use, which hold a GPU slot, which sit in host memory, and the loads the next step waits for.

vLLM V1 admits a waiting request only if its adapter is already in the batch or fewer than `max_loras` distinct
adapters run (`vllm/v1/core/sched/scheduler.py`: a request that would exceed it is skipped, the next one tried).
A running adapter keeps its GPU slot; a new one takes a free slot or the least recently used idle one, copied from
host memory, and read from storage first when the host cache (`max_cpu_loras`, also LRU) no longer holds it
(`vllm/lora/worker_manager.py` `LRUCacheWorkerLoRAManager`). The copy and the read run before the step's forward
pass, so the whole step waits for them.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class AdapterLimits:
    """What one replica holds of its adapters, and what bringing one in costs (seconds)."""

    slots: int  # GPU slots: distinct adapters one batch may hold
    host_slots: int  # adapters the host cache keeps
    host_copy_seconds: float  # a slot filled from host memory
    storage_read_seconds: float  # an adapter read from storage into host memory


class AdapterSlots:
    """The replica's adapter state (see the module docstring); `adapter_of[i]` is request i's adapter."""

    def __init__(self, limits: AdapterLimits, adapter_of: list[int]) -> None:
        self.limits = limits
        self.adapter_of = adapter_of
        self.running: dict[int, int] = {}  # adapter -> running requests that use it
        self.gpu: OrderedDict[int, None] = OrderedDict()  # resident adapters, least recently used first
        self.host: OrderedDict[int, None] = OrderedDict()
        self.pending_seconds = 0.0  # loads the next step waits for
        self.loads = 0  # GPU slots filled
        self.storage_reads = 0
        self.stall_seconds = 0.0  # steps' waits for loads, all together
        self.queued: dict[int, int] = {}  # adapter -> its requests in the replica's queue

    def enqueue(self, request: int) -> None:
        adapter = self.adapter_of[request]
        self.queued[adapter] = self.queued.get(adapter, 0) + 1

    def none_admissible(self) -> bool:
        """True when no queued request can join: every slot runs an adapter and none of those has a request queued
        (a blocked queue answered without scanning it)."""
        running = self.running
        return len(running) >= self.limits.slots and not any(self.queued.get(a, 0) for a in running)

    def admissible(self, request: int) -> bool:
        """Whether the request's adapter fits the batch: already running, or a distinct adapter to spare."""
        adapter = self.adapter_of[request]
        return adapter in self.running or len(self.running) < self.limits.slots

    def admit(self, request: int) -> None:
        """The request starts: its adapter runs, loaded first if it holds no slot."""
        adapter = self.adapter_of[request]
        left = self.queued.get(adapter, 0) - 1
        if left > 0:
            self.queued[adapter] = left
        else:
            self.queued.pop(adapter, None)
        self.running[adapter] = self.running.get(adapter, 0) + 1
        if adapter in self.gpu:
            self.gpu.move_to_end(adapter)
            return
        if len(self.gpu) >= self.limits.slots:
            idle = next(a for a in self.gpu if a not in self.running)  # exists: running adapters <= slots
            del self.gpu[idle]
        self.gpu[adapter] = None
        self.loads += 1
        self.pending_seconds += self.limits.host_copy_seconds
        if adapter in self.host:
            self.host.move_to_end(adapter)
            return
        if len(self.host) >= self.limits.host_slots:
            self.host.popitem(last=False)
        self.host[adapter] = None
        self.storage_reads += 1
        self.pending_seconds += self.limits.storage_read_seconds

    def release(self, request: int) -> None:
        """The request finished or was preempted: its adapter stays resident, idle once nobody runs it."""
        adapter = self.adapter_of[request]
        left = self.running.get(adapter, 0) - 1
        if left > 0:
            self.running[adapter] = left
        else:
            self.running.pop(adapter, None)

    def take_pending_seconds(self) -> float:
        """The loads the coming step waits for (then none)."""
        seconds, self.pending_seconds = self.pending_seconds, 0.0
        self.stall_seconds += seconds
        return seconds
