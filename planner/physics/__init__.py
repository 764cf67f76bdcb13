"""Physics: every cost term once (memory, FLOPs, roofline, collectives, efficiencies, cost)."""
