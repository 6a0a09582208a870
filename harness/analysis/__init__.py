"""The analysis room: from result files to the verdict, the report and the figures.

Owns: analyze.py (analyze / analyze_dir: gather then decide, from a folder to its files), gather.py
(the checks, and what the statistics read from the results, made compact), decide.py (the statistics
and analysis.json's content, also in a second process), diverged.py (runs that diverged, counted as
stats.diverged says), selection.py (which runs count), seed_reach.py (whether the seed reached the training), comparability.py and certificate.py (one identity, or what differs; run_identity.py a run's identity
read from its result; copies.py one run per (seed, arm) and the digest of the runs used; shown_apart.py shows differing
values cut around where they differ; math_identity.py the math modes as identity parts), evidence.py (the
other metrics, per-example records, setup), curves.py (the learning curves per arm), blocks.py (analysis.json's blocks), grid.py
(one A/B at several settings), across_conditions.py (its points read together), conditions.py (the declared conditions of
ab.conditions read together: the root's analysis.json, report.md and forest plot), summary.py (the
verdict screen), report.py, markdown.py, figures.py and sequential_figure.py (the terminal, report.md
and the PNGs), outputs.py (one analysis's files replaced together or not at all).

May import: harness.stats, harness.config (the declaration), harness.results. Never trains.
"""

from harness.analysis.analyze import analyze, analyze_dir  # noqa: F401
from harness.analysis.decide import SCHEMA  # noqa: F401
from harness.analysis.selection import AnalysisError  # noqa: F401
