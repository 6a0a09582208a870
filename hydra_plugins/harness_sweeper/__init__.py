"""The harness's sweepers: plain (the default of ``-m``: Hydra's basic sweeper, plain_sweeper.py),
sequential (``hydra/sweeper=harness_sequential``, sequential_sweeper.py) and race
(``hydra/sweeper=harness_race``, race_sweeper.py); _lost_units.py, shared by them, makes a job that
dies (SIGKILL, scancel) a named failed unit instead of a traceback.

Lives in the top-level ``hydra_plugins`` namespace package (which has no ``__init__.py``) so that
Hydra discovers it; the heavy work is in ``_impl.py``, imported only when the sweeper is used.
"""
