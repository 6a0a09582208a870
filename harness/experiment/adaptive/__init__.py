"""Adaptive runs: seeds in batches, a look between batches, until the decisions are settled.

Owns: loop.py (the one loop and the rules that end it: identity, stall, failure budget), two
policies -- sequential_policy.py (an A/B until each arm is settled against the baseline) and
race_policy.py (K configurations until the best is left) -- and the in-process launcher,
in_process.py (the Hydra launcher is hydra_plugins/harness_sweeper/hydra_launcher.py). Below them:
sequential_plan.py (which results count, the looks, what runs next; sequential.json),
sequential_diverged.py (a diverged run counted as stats.diverged says), identity_watch.py (one
config and code identity from batch to batch), race_plan.py (the race's design, looks and drops;
race.json) and race_report.py (the race's analysis: analysis.json, report.md, race.png).
"""
