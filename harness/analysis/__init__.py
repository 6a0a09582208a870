"""The analysis room: from result files to the verdict, the report and the figures.

Owns: analyze.py (analyze / analyze_dir: gather then decide, from a folder to its files), gather.py
(the checks, and what the statistics read from the results, made compact), decide.py (the statistics
and analysis.json's content, also in a second process), blocks.py (analysis.json's blocks),
selection.py (which runs count), diverged.py (runs that diverged, counted as stats.diverged says),
other_metrics.py (the other declared metrics, arm against baseline), example_records.py (the
per-example outcomes of the analysed metric), run_setup.py (determinism, device, precision, threads
across the runs), dose_trend.py (the paired trend over a numeric factor), curves.py (the learning
curves per arm), grid.py (one A/B at several settings), across_conditions.py (its points read
together), conditions.py (the declared conditions of ab.conditions read together: the root's
analysis.json, report.md and forest plot).

Sub-rooms: identity/ (which results may be compared: one identity, one run per (seed, arm), whether
the seed reached the training, the repro certificate's) and render/ (what shows an analysis: the
verdict screen, the terminal, report.md, the PNGs, and its files written together); render/ computes
no statistics.

May import: harness.stats, harness.config (the declaration), harness.results. Never trains.
"""

from harness.analysis.analyze import analyze, analyze_dir  # noqa: F401
from harness.analysis.decide import SCHEMA  # noqa: F401
from harness.analysis.selection import AnalysisError  # noqa: F401
