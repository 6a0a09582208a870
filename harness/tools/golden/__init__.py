"""Golden fingerprints, ``python -m harness.golden``. Owns: golden.py (save and check: did my refactor
change the numerics?; compose_config and select_run, shared with audit and noise), golden_words.py
(what a check says), golden_stats.py (statistical goldens: the bits differ, did the results?),
golden_ops.py (a golden's stored op stream)."""
