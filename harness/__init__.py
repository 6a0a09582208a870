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
