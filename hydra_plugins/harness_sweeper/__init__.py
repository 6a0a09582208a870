"""The harness's sequential sweeper: ``python -m harness -m hydra/sweeper=harness_sequential ...``.

Lives in the top-level ``hydra_plugins`` namespace package (which has no ``__init__.py``) so that
Hydra discovers it; the heavy work is in ``_impl.py``, imported only when the sweeper is used.
"""
