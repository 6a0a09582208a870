"""Adaptive runs: seeds in batches, a look between batches, until the decisions are settled.

Owns: sequential.py (the sequential mode in one process), sequential_plan.py (its bookkeeping: which
results count, the looks, what runs next; sequential.json), sequential_diverged.py (a diverged run
counted as stats.diverged says), identity_watch.py (one config and code identity from batch to
batch), race_plan.py (the race of K configurations: its design, looks, drops; race.json) and
race_report.py (the race's analysis: analysis.json, report.md, race.png).
"""
