"""Noise against seed noise. Owns: noise_audit.py, noise_runs.py and noise_table.py
(``python -m harness.noise_audit``: nondeterminism noise against seed noise, its runs, its words and
plot), noise_sources.py, noise_sources_runs.py and noise_sources_table.py (``python -m
harness.noise_sources``: the seed noise, one source at a time, its runs, its words and figure)."""
