"""Resume: which runs to skip, rerun or set aside, and one process per run at a time.

A run is skipped only when its completed result is sound (it belongs to its folder's seed and arm,
has its fingerprints, and finite numbers for metrics) and matches the config and the code; else it
is rerun and the log says why. What is replaced is moved under ``superseded/``, never deleted.
"""

from __future__ import annotations

import contextlib
import math
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from .identity import config_hash, describe_code_change
from .results import load_steps, read_json, read_result
from .runner import code_of


def resume_decision(path: Path, cfg_hash: str, code: dict, seed=None, arm=None) -> tuple[bool, str]:
    """(skip?, why). A run is skipped only if its completed result is sound (it belongs to this
    folder's seed and arm, has its fingerprints, and finite numbers for metrics) and matches the
    config and the code."""
    if not path.exists():
        return False, "no result yet"
    try:
        old = read_result(path)
    except (OSError, ValueError):
        return False, "the existing result file is unreadable"
    if old.get("status") != "completed":
        return False, f"the existing result is {old.get('status')!r}"
    unsound = _unsound(old, seed, arm)
    if unsound:
        return False, f"the existing result does not check out ({unsound})"
    if old.get("config_hash") != cfg_hash:
        return False, f"the config changed (hash {old.get('config_hash')} -> {cfg_hash})"
    if old.get("code_version") != code["version"]:
        return False, describe_code_change(old.get("code"), code)
    return True, "completed with the same config and code"


def _unsound(old: dict, seed, arm) -> Optional[str]:
    if seed is not None and (old.get("seed"), str(old.get("arm"))) != (seed, str(arm)):
        return f"it holds seed {old.get('seed')} arm {old.get('arm')}, not this folder's seed {seed} arm {arm}"
    fp = old.get("fingerprints") or {}
    missing = [k for k in ("init", "data_order", "final") if not isinstance(fp.get(k), str)]
    try:
        steps = load_steps(old)
        if not steps or not steps.get("loss"):
            missing.append("steps")
    except (KeyError, TypeError, ValueError):
        missing.append("steps")
    if missing:
        return f"fingerprints missing: {', '.join(missing)}"
    metrics = old.get("metrics")
    if not isinstance(metrics, dict) or not metrics:
        return "no metrics"
    bad = [k for k, v in metrics.items()
           if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)]
    if bad:
        return f"metric {bad[0]} is {metrics[bad[0]]!r}, not a finite number"
    return None


def supersede(path: Path) -> Optional[Path]:
    """Move an old result aside (never delete what was computed)."""
    if not path.exists():
        return None
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
    dest = path.parent / "superseded" / f"result.{stamp}.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(path, dest)
    weights = path.parent / "weights.pt"
    if weights.exists():
        os.replace(weights, dest.with_suffix(".weights.pt"))
    return dest


@contextlib.contextmanager
def run_lock(folder: Path, on_wait):
    """An exclusive lock on a run's folder (released when the process dies, so never stale)."""
    import fcntl

    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            on_wait()
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def set_aside_other_configurations(out_dir: Path, arms: dict, seeds, log) -> None:
    """Results in this folder for seeds the experiment no longer runs, made with another config or
    code, are moved under superseded/ (kept, never deleted): otherwise they would sit beside the
    current ones and block (or, worse, join) the analysis."""
    from .results import find_result_files

    planned = {(s, a) for s in seeds for a in arms}
    for path in find_result_files(out_dir / "runs") if (out_dir / "runs").is_dir() else []:
        try:
            old = read_json(path)
        except (OSError, ValueError):
            continue
        seed, arm = old.get("seed"), str(old.get("arm"))
        if (seed, arm) in planned:
            continue
        current = arms.get(arm)
        if current is not None and old.get("config_hash") == config_hash(current) \
                and old.get("code_version") == code_of(current)["version"]:
            continue  # an extra seed of the same configuration: still comparable
        moved = supersede(path)
        log(f"seed={seed} arm={arm}: set aside (made with another configuration or code than this "
            f"experiment's, and not among its seeds) at {moved}")
