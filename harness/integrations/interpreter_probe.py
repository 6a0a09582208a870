"""What a Python interpreter has installed that decides a command's bits: its version and the
versions of torch, numpy and the trainer libraries, read from their files without importing them.

Stdlib only and free of the harness's imports: a command arm runs this file with the command's own
interpreter (``python interpreter_probe.py`` prints the JSON), which may not have the harness
installed; the harness's own interpreter calls ``probe()`` in-process.
"""

from __future__ import annotations

import json
import platform
import re

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


if __name__ == "__main__":
    print(json.dumps(probe()))
