"""What a Python interpreter has installed that decides a command's bits: its version and the
versions of torch, numpy and the trainer libraries, read from their files without importing them.

Stdlib only and free of the harness's imports: ``interpreter_identity(path)`` runs this file with the
command's own interpreter (``python interpreter_probe.py`` prints the JSON), which may not have the
harness installed; for the harness's own interpreter it calls ``probe()`` in-process.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys

# torch and numpy, and the libraries that drive a training loop (identity.TRAINERS)
PACKAGES = ("torch", "numpy", "lightning", "pytorch_lightning", "lightning_fabric", "transformers", "accelerate",
            "timm")


def _torch_version():
    """torch/version.py's __version__, with its build suffix (2.14.1+cu130), as torch.__version__ says it."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("torch")
        if spec is None or not spec.origin:
            return None
        from pathlib import Path

        text = (Path(spec.origin).parent / "version.py").read_text()
        found = re.search(r"__version__ = '([^']+)'", text)
        return found.group(1) if found else None
    except (ImportError, OSError, ValueError):
        return None


def _version(name: str):
    from importlib import metadata

    for candidate in (name, name.replace("_", "-")):
        try:
            return metadata.version(candidate)
        except metadata.PackageNotFoundError:
            continue
    return None


def probe() -> dict:
    """{"python": version, "packages": {name: version}} (a package not installed is left out)."""
    found = {"torch": _torch_version(), **{name: _version(name) for name in PACKAGES if name != "torch"}}
    return {"python": platform.python_version(), "packages": {k: v for k, v in found.items() if v}}


_PROBED: dict = {}


def interpreter_identity(path: str) -> dict:
    """{"path", "python", "packages"} of a Python interpreter (the harness's own: read here; another:
    by running interpreter_probe.py with it, once per process). Unreadable: python and packages None,
    with the reason."""
    if path in _PROBED:
        return _PROBED[path]
    if os.path.abspath(path) == os.path.abspath(sys.executable):
        found = probe()
    else:
        try:
            proc = subprocess.run([path, __file__], capture_output=True, text=True, timeout=120,
                                  stdin=subprocess.DEVNULL)
            found = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else \
                {"unreadable": f"exited with code {proc.returncode}: {proc.stderr.strip()[-300:]}"}
        except (OSError, subprocess.SubprocessError, ValueError, IndexError) as e:
            found = {"unreadable": f"{type(e).__name__}: {e}"}
    out = {"path": path, "python": found.get("python"), "packages": found.get("packages")}
    if found.get("unreadable"):
        out["unreadable"] = found["unreadable"]
    _PROBED[path] = out
    return out


if __name__ == "__main__":
    print(json.dumps(probe()))
