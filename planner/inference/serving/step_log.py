"""What one simulated replica records: every step (duration, sequences sampled and held, KV blocks held) and,
per request, when it was sent, scheduled, answered and finished (`ReplicaTimeline`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, slots=True)
class ReplicaTimeline:
    """Per-request times of one replica (seconds from the start), and the step log."""

    index: np.ndarray  # request index in the whole stream
    sent_seconds: np.ndarray  # when the client sent it (arrival, or later under a client concurrency cap)
    scheduled_seconds: np.ndarray  # start of the step that first worked on it
    first_token_seconds: np.ndarray
    finish_seconds: np.ndarray
    output_tokens: np.ndarray
    preemptions: int
    step_seconds: np.ndarray  # duration of every step (runs expanded)
    step_batch: np.ndarray  # sequences that produced a token in that step
    step_running: np.ndarray  # sequences holding KV in that step
    step_kv_blocks: np.ndarray  # KV blocks in use in that step
    # Under speculative decoding, ITL by token: each burst of g tokens a sequence gains after a gap of d seconds
    # counts g tokens of d / g (the gaps and their token weights); None without speculation (ITL = steps).
    itl_seconds: np.ndarray | None = None
    itl_tokens: np.ndarray | None = None
    # multi-LoRA serving: GPU adapter slots filled, of those the adapters read from storage first, and the seconds
    # steps waited for them
    adapter_loads: int = 0
    adapter_storage_reads: int = 0
    adapter_stall_seconds: float = 0.0


class StepLog:
    """Every step's duration, sequences sampled, sequences held and KV blocks held (runs stored as one entry)."""

    def __init__(self) -> None:
        self.seconds: list[np.ndarray] = []
        self.single: list[float] = []  # durations of single steps and short runs, flushed into `seconds` in order
        self.counts: list[int] = []
        self.batch: list[int] = []
        self.running: list[int] = []
        self.kv_blocks: list[int] = []
        self.itl_seconds: list[float] = []  # speculative decoding: gap per token of each burst
        self.itl_tokens: list[int] = []  # and the tokens it stands for

    def bursts(self, seconds: float, gain_counts: list[int] | None, first_tokens: int) -> None:
        """A speculative step's token bursts: each decoding sequence's g tokens count g gaps of seconds / g
        (`gain_counts[g]` sequences gained g); each prompt finished in it, one token after the whole step."""
        if first_tokens:
            self.itl_seconds.append(seconds)
            self.itl_tokens.append(first_tokens)
        if gain_counts is not None:
            counts = gain_counts
            for g in range(1, len(counts)):  # gains of 0 are free slots
                if counts[g]:
                    self.itl_seconds.append(seconds / g)
                    self.itl_tokens.append(g * counts[g])

    def rounds(self, seconds: np.ndarray, batch: int, kv_blocks: np.ndarray, gain_counts: np.ndarray) -> None:
        """Speculative rounds of one batch of decoding sequences, each a `step` with its `bursts` (rows of
        gain counts by g), in order."""
        n = len(seconds)
        self.single.extend(seconds.tolist())
        self.counts.extend([1] * n)
        self.batch.extend([batch] * n)
        self.running.extend([batch] * n)
        self.kv_blocks.extend(kv_blocks.tolist())
        rows, gains = np.nonzero(gain_counts[:, 1:])  # row by row, g ascending, as `bursts` appends them
        gains += 1
        self.itl_seconds.extend((seconds[rows] / gains).tolist())
        self.itl_tokens.extend((gains * gain_counts[rows, gains]).tolist())

    def step(self, seconds: float, batch: int, running: int, kv_blocks: int) -> None:
        self.single.append(seconds)
        self.counts.append(1)
        self.batch.append(batch)
        self.running.append(running)
        self.kv_blocks.append(kv_blocks)

    def run(self, seconds: np.ndarray | list[float], batch: int, running: int, kv_blocks: int) -> None:
        if isinstance(seconds, list):
            self.single.extend(seconds)  # a short run's steps join the single ones (in order all the same)
        else:
            if self.single:
                self.seconds.append(np.asarray(self.single))
                self.single = []
            self.seconds.append(seconds)
        self.counts.append(len(seconds))
        self.batch.append(batch)
        self.running.append(running)
        self.kv_blocks.append(kv_blocks)

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        if self.single:
            self.seconds.append(np.asarray(self.single))
            self.single = []
        counts = np.asarray(self.counts, dtype=np.int64)
        seconds = np.concatenate(self.seconds) if self.seconds else np.zeros(0)
        return (
            seconds,
            np.repeat(np.asarray(self.batch, dtype=float), counts),
            np.repeat(np.asarray(self.running, dtype=float), counts),
            np.repeat(np.asarray(self.kv_blocks, dtype=float), counts),
        )


def timeline(indices, sent, scheduled, first, finish, output_tokens, preemptions, log: StepLog) -> ReplicaTimeline:
    """The replica's per-request times and its step log, as arrays."""
    seconds, batch, running, kv_blocks = log.arrays()
    return ReplicaTimeline(
        index=indices,
        sent_seconds=np.asarray(sent, dtype=float),
        scheduled_seconds=np.asarray(scheduled, dtype=float),
        first_token_seconds=np.asarray(first, dtype=float),
        finish_seconds=np.asarray(finish, dtype=float),
        output_tokens=output_tokens,
        preemptions=preemptions,
        step_seconds=seconds,
        step_batch=batch,
        step_running=running,
        step_kv_blocks=kv_blocks,
    )
