"""The harness's sweepers: sequential (``hydra/sweeper=harness_sequential``, harness_sweeper.py) and
race (``hydra/sweeper=harness_race``, race_sweeper.py).

Lives in the top-level ``hydra_plugins`` namespace package (which has no ``__init__.py``) so that
Hydra discovers it; the heavy work is in ``_impl.py``, imported only when the sweeper is used.
"""
