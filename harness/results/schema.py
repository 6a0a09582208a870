"""The result file's schema: its name and versions, where a run's file lives, how it is written and
read (per-step fingerprints packed, non-finite metrics named), and what a reader takes from it.

``runs/seed=<S>/arm=<NAME>/result.json`` is a contract that users' scripts rely on: its keys are
listed in docs/result-format.md.
"""

from __future__ import annotations

import base64
import math
import os
from pathlib import Path

from harness.results.atomic_io import read_json, write_json

SCHEMA = "harness.result/2"
SCHEMA_V1 = "harness.result/1"
READABLE_SCHEMAS = (SCHEMA, SCHEMA_V1)
RESULT_NAME = "result.json"
STEPS_FORMAT = "hex-concat/base64"  # the hex digits of every step, concatenated, as bytes, base64
_STEP_DIGITS = {"loss": 8, "params": 16}

# A result.json the harness writes is well under 10 MB (10,000 steps and 10,000 per-example records:
# ~2 MB); a bigger one is not a result: named and skipped unread (parsing 1 GB takes 2-3 GB).
MAX_RESULT_BYTES = 64 * 2**20


def run_dir(root: str | os.PathLike, seed: int, arm: str) -> Path:
    return Path(root) / "runs" / f"seed={seed}" / f"arm={arm}"


def write_result(path: str | os.PathLike, result: dict) -> None:
    """Atomically write a result dict as result.json in the current format (steps packed).

    ``result`` itself is not changed: a caller may keep using its per-step lists.
    """
    out = dict(result)
    out.pop("_path", None)
    out["schema"] = SCHEMA
    non_finite = _non_finite(out.get("metrics"))
    if non_finite:  # JSON writes them as null: the marker keeps a diverged run from reading as "missing"
        out[NON_FINITE_KEY] = non_finite
    fingerprints = out.get("fingerprints")
    if isinstance(fingerprints, dict) and "steps" in fingerprints:
        out["fingerprints"] = {**fingerprints, "steps": pack_steps(fingerprints["steps"])}
    write_json(path, out)


def read_result(path: str | os.PathLike) -> dict:
    """One result file as a dict, with ``_path`` set so that load_steps can name it. A file above
    MAX_RESULT_BYTES, or not a regular file, raises FileRefused (an OSError) unread."""
    obj = read_json(path, MAX_RESULT_BYTES)
    if isinstance(obj, dict):
        obj["_path"] = str(path)
    return obj


def pack_steps(steps):
    """{loss: [hex], params: [hex]} -> the packed field; an already packed (or odd) value is kept."""
    if not isinstance(steps, dict) or steps.get("format") == STEPS_FORMAT:
        return steps
    packed = {"format": STEPS_FORMAT, "n": None}
    for key, digits in _STEP_DIGITS.items():
        values = steps.get(key)
        if not isinstance(values, list) or any(not isinstance(v, str) or len(v) != digits for v in values):
            return steps  # not the shape we pack: keep it as it is, load_steps still reads it
        try:
            raw = bytes.fromhex("".join(values))
        except ValueError:
            return steps
        packed[key] = base64.b64encode(raw).decode("ascii")
        if packed["n"] is None:
            packed["n"] = len(values)
        elif packed["n"] != len(values):
            return steps
    return packed


def digests_version(fingerprints) -> int:
    """The digest version (training/host_digest.py) a result's per-step parameter digests and
    content data-order digest were computed in: 1 where none is recorded (results before 2).
    Those two compare only within one version; init and final compare across versions."""
    v = (fingerprints or {}).get("digests", 1) if isinstance(fingerprints, dict) else 1
    return v if isinstance(v, int) and not isinstance(v, bool) else 1


def load_steps(result_or_path) -> dict:
    """The per-step fingerprints {loss: [8 hex digits], params: [16 hex digits]} of a result.

    Takes a result dict (of either schema version, or fresh from training) or a result.json path.
    A result without per-step fingerprints gives empty lists.
    """
    result = result_or_path if isinstance(result_or_path, dict) else read_json(result_or_path)
    steps = (result.get("fingerprints") or {}).get("steps")
    if not isinstance(steps, dict):
        return {"loss": [], "params": []}
    if steps.get("format") != STEPS_FORMAT:
        return {"loss": list(steps.get("loss") or []), "params": list(steps.get("params") or [])}
    out = {}
    for key, digits in _STEP_DIGITS.items():
        hexed = base64.b64decode(steps[key]).hex()
        out[key] = [hexed[i:i + digits] for i in range(0, len(hexed), digits)]
    return out


def diverged(result: dict, metric: str) -> bool:
    """A run whose loss or ``metric`` became non-finite (stats.diverged counts it), as opposed to any
    other failure: a NonFiniteLoss, or a completed run whose metric is NaN or infinite."""
    if result.get("status") != "completed":
        return (result.get("error") or {}).get("type") == "NonFiniteLoss"
    value = metric_value(result, metric)
    return isinstance(value, float) and not math.isfinite(value)


# result.json's record of the metrics that were NaN or infinite ({name: "nan" | "inf" | "-inf"}),
# written beside them only when there are any: JSON has no such numbers, and a null alone reads as
# a metric the run never reported.
NON_FINITE_KEY = "non_finite_metrics"


def _non_finite(metrics) -> dict:
    if not isinstance(metrics, dict):
        return {}
    return {str(k): str(float(v)) for k, v in metrics.items()
            if isinstance(v, float) and not math.isfinite(v)}


def metric_value(result: dict, metric: str):
    """``metric`` of a result as the run reported it: a NaN or infinity written to result.json
    (null there, named under NON_FINITE_KEY) comes back as that float; anything else as stored."""
    value = (result.get("metrics") or {}).get(metric)
    word = (result.get(NON_FINITE_KEY) or {}).get(metric) if value is None else None
    return float(word) if word in ("nan", "inf", "-inf") else value
