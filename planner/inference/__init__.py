"""Inference: one scenario in, one plan out, in modules read top to bottom.

scenario.py (validated input) -> inputs.py (the numbers the formulas read: scenario, accelerator, replica
shape) -> memory.py (bytes per GPU, what else fits) -> steps.py (prefill and decode steps, one function
per term) -> metrics.py (the steady-state serving cycle and its price; the sweep runs this over arrays)
-> explain.py (bottleneck, warnings, assumptions, equations) -> plan.py (`plan_inference`, the frozen
records of results.py).
"""
