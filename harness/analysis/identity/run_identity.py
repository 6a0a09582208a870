"""A run's identity, read from its result: the parts that decide its numbers apart from the seed and
the factor (comparability.py compares them; copies.py merges copies of a run by them).

- ``hashes``: config_hash and base_hash recomputed from the result's own ``config`` block
  (results.config_digest), with a note when a recorded hash disagrees with it;
- ``identity``: part -> value, for the parts in ``PARTS``: the config outside the factor, the code
  (code_version) and the environment that decides the bits (``ENV_PARTS``), without a part the
  factor itself changes.

Pure functions over result dicts, cached per distinct input (a sweep's results share them).
Every name is importable from comparability.py too.
"""

from __future__ import annotations

import json

from harness import HarnessError
from harness.analysis.identity.math_identity import MATH_PARTS, math_part
from harness.results import NOT_IN_IDENTITY, config_digest, key_bytes

_DIGESTS: dict = {}  # (config without seed/arm, factor) -> (config_hash, base_hash): configs repeat
_IDENTITIES: dict = {}  # what identity() reads, as bytes -> its identity dict
_LEFT_OUT = frozenset(NOT_IN_IDENTITY)  # a set: asked for each key of 10,000 configs

# identity part -> the config path that, when it is (under) the factor, lets arms differ in it
ENV_PARTS = {
    "env.device_type": "device",
    "env.gpu": "device",
    "env.torch": None,
    "env.cpu_capability": None,
    "env.threads": "determinism.threads",
    "env.determinism_mode": "determinism.mode",
    "env.precision": "precision",
    "env.math_modes": "determinism.float32_matmul_precision|determinism.tf32_cudnn",  # either lets arms differ
    "env.math_environment": None,
    "env.world": "train.nproc",  # processes per run: world size, backend, NCCL settings (None: one)
}
PARTS = ("base_hash", "code_version", *ENV_PARTS)
class IdentityError(ValueError, HarnessError):
    """Results of different identities, or conflicting copies of one run; the message names them."""


def _under(key: str, path: str) -> bool:
    return key == path or key.startswith(path + ".")


def _canonical(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _code_version(value, factor) -> str:
    """The code a run's identity compares: with ab.factor=code, the revision's snapshot (the version's
    /code-DIGEST part, experiment/code_arms.py) is the factor; the harness and torch still count."""
    text = _canonical(value)
    return text.rsplit("/code-", 1)[0] if factor == "code" and isinstance(value, str) else text


def where(r) -> str:
    """How to name a result in a message: its file when it came from one."""
    return str(r.get("_path") or f"(result of seed {r.get('seed')} arm {r.get('arm')})")


def factor_of(r) -> str | None:
    factor = r.get("factor")
    if not factor:
        factor = ((r.get("config") or {}).get("ab") or {}).get("factor")
    return factor


def hashes(r) -> tuple:
    """(config_hash, base_hash, problem): recomputed from the config block when it has one.

    ``problem`` says when a recorded hash disagrees with the config block (the file was edited, or
    written under another hashing rule): such a result does not vouch for its own identity.
    """
    cached = r.get("_hashes")
    if cached is not None:
        return cached
    config = r.get("config")
    recorded = (r.get("config_hash"), r.get("base_hash"))
    if not isinstance(config, dict):
        out = (recorded[0], recorded[1], None)
    else:
        factor = factor_of(r)
        key = (key_bytes({k: v for k, v in config.items() if k not in _LEFT_OUT}, sort_keys=False), factor)
        computed = _DIGESTS.get(key)
        if computed is None:
            if len(_DIGESTS) > 10_000:
                _DIGESTS.clear()
            computed = _DIGESTS[key] = (config_digest(config), config_digest(config, exclude_factor=factor))
        wrong = [f"{name} {old} (its config block gives {new})"
                 for name, old, new in zip(("config_hash", "base_hash"), recorded, computed)
                 if old is not None and old != new]
        out = (computed[0], computed[1], ("records " + " and ".join(wrong)) if wrong else None)
    r["_hashes"] = out  # a private key, like _path: never written back
    return out


def _env_part(r, part):
    env = r.get("env") or {}
    if part == "env.device_type":
        device = env.get("device")
        return None if device is None else str(device).split(":")[0]
    if part == "env.gpu":
        return env.get("device_name") if str(env.get("device", "")).startswith("cuda") else None
    if part == "env.determinism_mode":
        return env.get("mode")
    if part == "env.precision":
        return env.get("precision", (r.get("config") or {}).get("precision"))
    if part in MATH_PARTS:
        return math_part(env, part)
    if part == "env.world":
        from harness.integrations.ranks import world_words  # torch-free

        return world_words(env.get("world"))
    return env.get(part[len("env."):])


def identity(r) -> dict:
    """part -> value for one result; env parts the factor may change are left out, and so are the
    env parts a failed run never recorded (it may have failed before the environment was read)."""
    cached = r.get("_identity")
    if cached is not None:
        return cached
    factor = factor_of(r)
    # what the parts are read from: a sweep's results share it, so each distinct one is read once
    key = key_bytes([factor, hashes(r)[1], r.get("code_version"), r.get("env"), r.get("status") == "completed",
                     (r.get("config") or {}).get("precision") if isinstance(r.get("config"), dict) else None],
                    sort_keys=False)
    out = _IDENTITIES.get(key)
    if out is None:
        out = {"base_hash": hashes(r)[1], "code_version": _code_version(r.get("code_version"), factor)}
        for part, path in ENV_PARTS.items():
            if path is not None and factor and any(_under(p, factor) or _under(factor, p) for p in path.split("|")):
                continue
            value = _env_part(r, part)
            if value is None and r.get("status") != "completed":
                continue
            out[part] = value
        if len(_IDENTITIES) > 10_000:
            _IDENTITIES.clear()
        _IDENTITIES[key] = out
    r["_identity"] = out  # shared by the results it describes: read, never changed
    return out


def _hashable(value):
    return value if isinstance(value, (str, int, float, bool, type(None))) else key_bytes(value)


def _short(value) -> str:
    if value is None:
        return "missing"
    text = _canonical(value) if not isinstance(value, (int, float)) or isinstance(value, bool) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


__all__ = ["ENV_PARTS", "IdentityError", "PARTS", "factor_of", "hashes", "identity", "where"]
