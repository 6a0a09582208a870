"""harness: paired A/B experiments for PyTorch that are bit-exact and honest about noise.

Importing this package sets ``CUBLAS_WORKSPACE_CONFIG`` (when unset) before torch is imported,
because cuBLAS reads it once, when CUDA creates its first handle: set later, it is silently ignored.
"""

import os
import sys

__version__ = "0.1.0"

CUBLAS_WORKSPACE_CONFIG = ":4096:8"

# What the process looked like when the harness got control; determinism.py reports it.
CUBLAS_WORKSPACE_CONFIG_PRESET = os.environ.get("CUBLAS_WORKSPACE_CONFIG")
TORCH_IMPORTED_FIRST = "torch" in sys.modules
CUDA_INITIALIZED_FIRST = bool(
    TORCH_IMPORTED_FIRST and sys.modules["torch"].cuda.is_initialized()
)

if CUBLAS_WORKSPACE_CONFIG_PRESET is None:
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE_CONFIG


class HarnessError(RuntimeError):
    """The root of the harness's errors: the experiment could not run or could not be analysed, and
    the message says why. ``harness.run`` and ``harness.analyze_folder`` raise it; every other error
    the harness raises is a subclass that keeps its own builtin base too (an ``ExperimentError`` is
    still a ``ValueError``, an ``OutputsNotWritten`` still an ``OSError`` with its errno). Defined
    here, the one module every room may import, so defining it costs no import."""


# The public API, imported on first use (importing harness must stay cheap and must not import
# torch before CUBLAS_WORKSPACE_CONFIG is set above):
#   harness.run(overrides=[...], out_dir=...)  -> ExperimentResult  (run an experiment from Python)
#   harness.analyze_folder(folder, ...)        -> ExperimentResult  (analyse result files)
# (not harness.analyze: that name is the `python -m harness.analyze` command's module)
#   harness.Run                                the object a training function receives
#   harness.instantiate(node, **call_site)     how every _target_ node is built
#   harness.HarnessError                       what harness.run and analyze_folder raise; every
#                                              error of the harness is a subclass
#   harness.attach(seed=None)                  in a script a command arm starts: the unit's Run
#                                              (on its own: a stand-alone Run that records nothing)
#   harness.rank_timeout()                     in a torchrun script: train.rank_timeout_s as a
#                                              timedelta for init_process_group (None: torch's)
_PUBLIC = {
    "run": ("harness.api", "run"),
    "analyze_folder": ("harness.api", "analyze_folder"),
    "ExperimentResult": ("harness.api", "ExperimentResult"),
    "Run": ("harness.training.run", "Run"),
    "TensorBatches": ("harness.training.batches", "TensorBatches"),
    "instantiate": ("harness.training.components", "instantiate"),
    "attach": ("harness.integrations.attach", "attach"),
    "rank_timeout": ("harness.integrations.ranks.rank_timeout", "rank_timeout"),
}
__all__ = ["__version__", "HarnessError", *_PUBLIC]


def __getattr__(name):
    if name in _PUBLIC:
        import importlib

        module, attr = _PUBLIC[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'harness' has no attribute {name!r}")
