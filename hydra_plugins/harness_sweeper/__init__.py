"""The harness's sweepers: plain (the default of ``-m``: Hydra's basic sweeper, plain_sweeper.py),
sequential (``hydra/sweeper=harness_sequential``, sequential_sweeper.py) and race
(``hydra/sweeper=harness_race``, race_sweeper.py): the last two run harness/experiment/adaptive/'s
loop on hydra_launcher.py's launcher; _lost_units.py, shared by them all, makes a job that dies
(SIGKILL, scancel) a named failed unit instead of a traceback.

Lives in the top-level ``hydra_plugins`` namespace package (which has no ``__init__.py``) so that
Hydra discovers it; every module here is imported by Hydra's plugin discovery in every app, so
the harness is imported only inside methods, when a sweeper runs.
"""
