"""A result's math modes as identity parts (read by comparability.py).

``env.math_modes`` (harness/training/math_modes.py: TF32 and float32 matmul precision, as pinned,
and as the training function left them when it switched them) decide the bits of any float32 run;
``env.math_environment`` (TF32/cuBLAS variables, cuDNN and cuBLAS versions) those of a GPU run only.
"""

from __future__ import annotations

MATH_PARTS = ("env.math_modes", "env.math_environment")


def math_part(env: dict, part: str):
    """The value of one of MATH_PARTS for a result's ``env`` (None: not recorded, or not relevant)."""
    if part == "env.math_environment":
        return env.get("math_environment") if str(env.get("device", "")).startswith("cuda") else None
    if env.get("math_modes") is None:
        return None
    modes = {**env["math_modes"], **{f"{k} at end": v for k, v in (env.get("math_modes_at_end") or {}).items()}}
    return ", ".join(f"{k}={v}" for k, v in modes.items())  # short text: a refusal names what differs
