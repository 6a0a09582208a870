"""The tools room: the commands around experiments, each ``python -m harness.<tool>``.

Owns: analyze.py (re-analyse a folder as declared, or an alternative), diff.py (where two runs part), diff_words.py (what diff says),
golden.py (golden fingerprints: did my refactor change the numerics?), golden_words.py (what a check says), golden_stats.py (statistical
goldens: the bits differ, did the results?), golden_ops.py (a golden's stored op stream), ops.py
(diff --ops: the first aten op whose bits differ), module_stack.py (which module runs an op),
butterfly.py (diff's plot), noise_audit.py, noise_runs.py and noise_table.py (nondeterminism noise against seed noise),
noise_sources.py, noise_sources_runs.py and noise_sources_table.py (the seed noise, one source at a time), audit.py (which ops are deterministic),
args.py (their shared command-line handling), fast_exit.py (a command's end without the interpreter's
teardown), ledger.py (the door to harness/ledger/cli.py). The
``harness/<tool>.py`` files beside the rooms are
the commands' entry points and hold no logic.

May import: harness.experiment (to run units as the harness does), harness.analysis, harness.ledger,
harness.config, harness.training, harness.results; never duplicates the runner.
"""
