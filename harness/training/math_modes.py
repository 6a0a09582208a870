"""Math modes: which float32 arithmetic a unit's matmuls and convolutions use, pinned, read, restored.

TF32 (CUDA matmul and cuDNN) and oneDNN's reduced precisions (the CPU's matmul with
float32_matmul_precision high or medium, on CPUs that have them) change the bits of "fp32" runs, and
they are process-wide switches a training function can flip. So each unit pins them from the
config (determinism.float32_matmul_precision, determinism.tf32_cudnn), records them with the
environment variables and library versions that decide them, and puts back what it found after the
unit, so one unit's training function cannot change the next unit's numerics in the same worker.

torch 2.14 has two APIs for these switches (``torch.set_float32_matmul_precision`` and
``allow_tf32``, and the per-backend ``fp32_precision``); reading a legacy one after the other was
used can raise, so everything here reads and writes ``fp32_precision``, plus the legacy matmul
precision where it is consistent.
"""

from __future__ import annotations

import functools
import os
from typing import Optional

PRECISIONS = ("highest", "high", "medium")
# read by CUDA libraries or torch at their first use: they decide TF32 and cuBLAS's algorithms
ENV_VARS = ("NVIDIA_TF32_OVERRIDE", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE", "TORCH_BLAS_PREFER_CUBLASLT",
            "CUBLASLT_WORKSPACE_SIZE", "CUBLAS_WORKSPACE_CONFIG")
# (module under torch.backends, attribute) of each fp32_precision switch; parents before children,
# so that restoring a parent (which a "none" child inherits) never overwrites a child's own value
_SWITCHES = (("", "generic"), ("cudnn", "cuda"), ("mkldnn", "mkldnn"), ("cuda.matmul", "cuda_matmul"),
             ("cudnn.conv", "cudnn_conv"), ("cudnn.rnn", "cudnn_rnn"), ("mkldnn.matmul", "mkldnn_matmul"),
             ("mkldnn.conv", "mkldnn_conv"), ("mkldnn.rnn", "mkldnn_rnn"))


def _switch(path: str):
    import torch

    obj = torch.backends
    for name in filter(None, path.split(".")):
        obj = getattr(obj, name)
    return obj


def _legacy_precision() -> Optional[str]:
    """torch.get_float32_matmul_precision(), or None when the two APIs were mixed (it then raises)."""
    import torch

    try:
        return torch.get_float32_matmul_precision()
    except RuntimeError:
        return None


def read() -> dict:
    """The math modes in force: float32_matmul_precision and every fp32_precision switch."""
    out = {"float32_matmul_precision": _legacy_precision()}
    for path, name in _SWITCHES:
        out[name] = _switch(path).fp32_precision
    return out


def pin(float32_matmul_precision: str, tf32_cudnn: bool) -> None:
    """Set every switch that decides float32 matmul and convolution arithmetic from the config."""
    import torch

    if float32_matmul_precision not in PRECISIONS:
        raise ValueError(f"determinism.float32_matmul_precision={float32_matmul_precision!r} is not one of "
                         f"{', '.join(PRECISIONS)} (highest: no TF32 or bf16 inside float32 matmuls).")
    torch.set_float32_matmul_precision(float32_matmul_precision)  # CUDA matmul and oneDNN matmul
    cudnn = "tf32" if tf32_cudnn else "ieee"
    torch.backends.cudnn.conv.fp32_precision = cudnn
    torch.backends.cudnn.rnn.fp32_precision = cudnn
    torch.backends.mkldnn.conv.fp32_precision = "ieee"  # no config key: oneDNN's conv stays float32
    torch.backends.mkldnn.rnn.fp32_precision = "ieee"


def restore(saved: dict) -> None:
    """Put back what ``read`` returned (the legacy precision first: setting it moves two switches)."""
    import torch

    if saved.get("float32_matmul_precision"):
        torch.set_float32_matmul_precision(saved["float32_matmul_precision"])
    for path, name in _SWITCHES:
        _switch(path).fp32_precision = saved[name]


def environment() -> dict:
    """The environment variables and library versions that decide these modes' bits (None: unset)."""
    out = {name: os.environ.get(name) for name in ENV_VARS}
    out.update(_libraries())
    return out


@functools.lru_cache(maxsize=1)
def _libraries() -> dict:
    import torch

    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {"cudnn_version": cudnn, "cublas_version": _distribution_version("nvidia-cublas")}


def _distribution_version(prefix: str) -> Optional[str]:
    """The installed wheel's version (nvidia-cublas-cu12, nvidia-cublas, ...): torch does not expose it."""
    from importlib import metadata

    for dist in metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name == prefix or name.startswith(prefix + "-"):
            return f"{name} {dist.version}"
    return None
