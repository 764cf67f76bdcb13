"""A continuous-batching server, simulated step by step (not token by token).

One replica runs the scheduler of vLLM V1 (`scheduler`: `vllm/v1/core/sched/scheduler.py`): every step first
gives each running sequence one decode token, then spends what is left of `max_num_batched_tokens` on prompt
chunks; when a growing sequence needs a KV block and none is free, the newest sequence is preempted and later
recomputed. A step's duration comes from a `StepCost` (`decode_runs`) — the roofline terms `plan()` uses — so
the simulation adds queueing and batching dynamics, not a second physics.

- `decoders`: the decoding sequences, kept so that one decode step (or, under speculative decoding, one
  draft-and-verify round in which each gains its own random 1 + A tokens) over all of them costs O(1).
- `scheduler`: `simulate_replica`, the loop (arrivals, admission, prompt chunks, preemption) over a
  `ReplicaContext` (engine limits, step pricing, client cap, speculation).
- `decode_runs`: runs of pure decode steps between events (an arrival that can be admitted, a completion, a
  KV block running out), and stretches of speculative rounds in which no sequence finishes, costed at once, so
  the loop count grows with requests, not with tokens. Vectorised and step-by-step costing give the same
  numbers bit for bit; the tests hold the whole loop to a plain one-step-at-a-time scheduler.
- `step_log`: every step's duration, batch, sequences and KV blocks held, and the per-request timeline.
"""
