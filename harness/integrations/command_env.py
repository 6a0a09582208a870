"""What a command unit's record says about the process it ran: what the harness knows, and only that.

The harness sets a command's threads (OMP_NUM_THREADS, MKL_NUM_THREADS), CUBLAS_WORKSPACE_CONFIG and
the interpreter of a ``python`` command (command_spec.interpreter_of): recorded as set. What happens
inside the script -- its deterministic mode, its torch, its device -- is known only when the script
reports it: ``harness.attach()`` writes it to ``ATTACHED_ENV_NAME`` in the unit's folder (captured
when it switched the modes and again at the script's exit). A script that did not attach leaves
those fields null (unknown), never a default the harness did not apply. Torch-free.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from pathlib import Path
from typing import Mapping, Optional

from harness.integrations.interpreter_probe import interpreter_identity

ATTACHED_ENV_NAME = "attached_env.json"  # in HARNESS_RUN_DIR: what the script's torch said (attach.py)

# what only the script's process can say: null unless it reported them
INSIDE = ("torch", "numpy", "cuda", "cudnn", "device", "device_name", "mode", "deterministic_algorithms",
          "deterministic_warn_only", "fill_uninitialized_memory", "cudnn_deterministic", "cudnn_benchmark",
          "interop_threads", "math_modes")

def command_environment(threads: int, interpreter: Optional[str], reported: Optional[Mapping] = None) -> dict:
    """result.json's env for a command unit: the machine, what the harness set for the command, the
    interpreter, and what the script reported about its own process (``reported``; None: unknown)."""
    import harness
    from harness.training.determinism import _cpu_name, cpu_capability_of_this_machine

    known = interpreter_identity(interpreter) if interpreter else None
    env = {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": _cpu_name(),
        "harness": harness.__version__,
        "interpreter": interpreter,  # the Python that ran the script (None: the command is not a python)
        "python": (known or {}).get("python"),
        **{key: None for key in INSIDE},
        # set by the harness in the command's environment (process.environment)
        "threads": int(threads),
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "CUBLAS_WORKSPACE_CONFIG": os.environ.get("CUBLAS_WORKSPACE_CONFIG") or harness.CUBLAS_WORKSPACE_CONFIG,
        "cublas_set_by_harness": harness.CUBLAS_WORKSPACE_CONFIG_PRESET is None,
        "reported_by_script": reported is not None,
    }
    if os.environ.get("CUDA_VISIBLE_DEVICES") is not None:  # a GPU worker's share, inherited by the command
        env["CUDA_VISIBLE_DEVICES"] = os.environ["CUDA_VISIBLE_DEVICES"]
    cap = cpu_capability_of_this_machine()  # the machine's, which the command's torch reads too
    if cap:
        env["cpu_capability"] = cap
    if reported is None:  # the precision a script computes in: the config's only when its Run applies it
        env["precision"] = None
    else:
        env.update({k: v for k, v in reported.items() if k not in ("OMP_NUM_THREADS", "CUBLAS_WORKSPACE_CONFIG")})
        env["reported_by_script"] = True
    return env


def read_reported(folder: Path) -> Optional[dict]:
    """What an attached script wrote about its process (None: it did not attach, or it is unreadable)."""
    try:
        found = json.loads((Path(folder) / ATTACHED_ENV_NAME).read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def command_code(cfg, code: dict) -> dict:
    """A command arm's code identity: ``code`` (its script and the .py files beside it) with the
    interpreter that runs it and that interpreter's packages. The harness's own interpreter's torch is
    in code["version"] already; another interpreter's Python and packages are added to the version
    (a digest, not its path), so that changing them is a code change, as a new torch is."""
    import hashlib
    import re

    from harness.integrations.command_spec import _read

    try:
        path = _read(cfg).interpreter()
    except (ValueError, TypeError, re.error):  # a bad command: the preflight refuses it, naming the key
        return code
    if path is None:
        return code
    known = interpreter_identity(path)
    out = {**code, "interpreter": known}
    if os.path.abspath(path) != os.path.abspath(sys.executable):
        digest = hashlib.sha256(json.dumps([known["python"], known["packages"]], sort_keys=True).encode()).hexdigest()
        out["version"] = f"{code['version']}/python-{digest[:12]}"
    return out
