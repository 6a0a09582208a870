"""A run's identity from its recorded config: which keys count, the hashes, and what differs.

config_hash (and base_hash, without the factor) is what resume, the analysis and the pairing checks
compare: two runs of one identity computed the same thing. The keys that change no result are one
list (CHANGES_NO_BIT), used by the identity here and by the output folder's name
(config.compose.NOT_IN_NAME), so the two cannot drift apart."""

from __future__ import annotations

import hashlib
import json

# The one list of config keys that change no result: how runs are scheduled, shown, logged and
# recorded, never what they compute. No run's identity holds them and no output folder is named by
# them (config.compose.NOT_IN_NAME); tests/test_identity_keys.py proves each changes no bit.
CHANGES_NO_BIT = ("resume", "lock_timeout", "progress", "tables", "workers", "logger", "ledger")
# Config keys that never change a run's numbers: left out of config_hash and base_hash. Besides the
# list above: a run's coordinates (seed, arm: the arm's value is at ab.factor), which runs exist (ab),
# their analysis (stats) and a label (experiment_name).
NOT_IN_IDENTITY = ("seed", "arm", *CHANGES_NO_BIT, "stats", "ab", "experiment_name")
REPRO_NOT_IN_IDENTITY = ("certificate", "code_paths", "code_git")
_FLOAT32_MATH = {("float32_matmul_precision", "highest"), ("tf32_cudnn", False)}


def config_digest(config: dict, exclude_factor: str | None = None) -> str:
    """config_hash (and, with exclude_factor, base_hash) of a plain resolved config dict.

    The rule experiment.config_hash applies to an arm's config, on the plain dict a result's
    ``config`` block holds: without the keys that never change the numbers (NOT_IN_IDENTITY) and
    how a run is checked (repro.certificate, code_paths, code_git: the code itself is identified by
    code_version); without everything under ``exclude_factor`` when given.
    """
    d = {k: v for k, v in config.items() if k not in NOT_IN_IDENTITY}
    if not any(v is not None for v in (d.get("seeds") or {}).values()):
        d.pop("seeds", None)  # no stream set apart: the identity (and bits) of a run before seeds.* existed
    if isinstance(d.get("determinism"), dict):  # float32 math, as before these keys: a CPU run's hash and bits
        d["determinism"] = {k: v for k, v in d["determinism"].items() if (k, v) not in _FLOAT32_MATH}
    if isinstance(d.get("train"), dict):
        # train.nproc at its default, one process: the identity of a run before the key existed
        d["train"] = {k: v for k, v in d["train"].items() if not (k == "nproc" and v == 1)}
    if isinstance(d.get("repro"), dict):
        d["repro"] = {k: v for k, v in d["repro"].items() if k not in REPRO_NOT_IN_IDENTITY}
    if exclude_factor:
        d = {k: v for k, v in flatten(d).items() if not (k == exclude_factor or k.startswith(exclude_factor + "."))}
    return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]


def flatten(obj, prefix="") -> dict:
    """{"a": {"b": 1}} -> {"a.b": 1}: config paths as keys (an empty mapping stays a key)."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            out.update(flatten(v, f"{prefix}{k}."))
        return out or {prefix[:-1]: {}}
    return {prefix[:-1]: obj}


def _leaves(obj, prefix: str = "") -> dict:
    """Like flatten, but an empty mapping has no leaves: what two configs' values are compared on."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            out.update(_leaves(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: obj}


def differences(a: dict, b: dict, ignore=()) -> list[tuple[str, object, object]]:
    """(key, value in a, value in b) for every flattened key whose values differ."""
    fa, fb = _leaves(a or {}), _leaves(b or {})
    missing = "(absent)"
    return [
        (k, fa.get(k, missing), fb.get(k, missing))
        for k in sorted(set(fa) | set(fb))
        if fa.get(k, missing) != fb.get(k, missing) and not any(k == i or k.startswith(i + ".") for i in ignore)
    ]
