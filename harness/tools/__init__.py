"""The tools room: the commands around experiments, each ``python -m harness.<tool>``.

Owns: analyze.py (re-analyse a folder as declared, or an alternative), audit.py (which ops are
deterministic), args.py (the tools' shared command-line handling), fast_exit.py (a command's end
without the interpreter's teardown). Sub-rooms:
golden/ (golden fingerprints: did my refactor change the numerics?), diff/ (where two runs part,
down to the aten op), noise/ (nondeterminism noise against seed noise, and the seed noise one source
at a time). The ``harness/<tool>.py`` files beside the rooms are the commands' entry points and hold
no logic.

May import: harness.experiment (to run units as the harness does), harness.analysis, harness.ledger,
harness.config, harness.training, harness.results; never duplicates the runner.
"""
