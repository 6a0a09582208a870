"""Resume: which runs to skip, rerun or set aside, and one process per run at a time.

A run is skipped only when its completed result is sound (it belongs to its folder's seed and arm,
has its fingerprints, and finite numbers for metrics) and matches the config and the code; else it
is rerun and the log says why. What is replaced is moved under ``superseded/``, never deleted.
"""

from __future__ import annotations

import contextlib
import math
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from harness.experiment.identity import config_hash, describe_code_change, describe_config_change
from harness.results import load_steps, read_json, read_result
from harness.experiment.runner import code_of


@dataclass
class Decision:
    skip: bool
    why: str  # for the log: "rerun, <why>" / "skipped, <why>"
    changed: Optional[str] = None  # "config" or "code": a sound completed result is rerun for this change
    old_final: Optional[str] = None  # that result's final fingerprint, to compare the rerun's with


def decide(path: Path, cfg_hash: str, code: dict, seed=None, arm=None, config: Optional[dict] = None) -> Decision:
    """Skip or rerun, and why. A run is skipped only if its completed result is sound (it belongs to
    this folder's seed and arm, has its fingerprints, and finite numbers for metrics) and matches the
    config and the code. ``config``: this run's plain config, to name the keys that changed."""
    if not path.exists():
        return Decision(False, "no result yet")
    try:
        old = read_result(path)
    except (OSError, ValueError):
        return Decision(False, "the existing result file is unreadable")
    if old.get("status") != "completed":
        return Decision(False, f"the existing result is {old.get('status')!r}")
    unsound = _unsound(old, seed, arm)
    if unsound:
        return Decision(False, f"the existing result does not check out ({unsound})")
    final = old["fingerprints"]["final"]
    if old.get("config_hash") != cfg_hash:
        what = describe_config_change(old.get("config"), config)
        return Decision(False, f"the config changed: {what}" if what else
                        f"the config changed (hash {old.get('config_hash')} -> {cfg_hash})", "config", final)
    if old.get("code_version") != code["version"]:
        return Decision(False, describe_code_change(old.get("code"), code), "code", final)
    return Decision(True, "completed with the same config and code")


def resume_decision(path: Path, cfg_hash: str, code: dict, seed=None, arm=None,
                    config: Optional[dict] = None) -> tuple[bool, str]:
    """(skip?, why): ``decide`` without the details."""
    d = decide(path, cfg_hash, code, seed, arm, config)
    return d.skip, d.why


def bits_after_rerun(decision: Decision, result: dict) -> Optional[str]:
    """After a rerun for a code change: whether the rerun's bits equal the replaced result's (their
    final fingerprints). After a config change only when they are equal (the changed keys did not
    change the numbers, worth knowing); that they changed is what a config change is expected to do.
    None when there is nothing to say."""
    if decision.changed is None or not decision.old_final or result.get("status") != "completed":
        return None
    new = (result.get("fingerprints") or {}).get("final")
    if new == decision.old_final:
        return f"after the {decision.changed} change, bits unchanged (final {new}, as before)" + (
            ": the changed keys did not change this run's numbers" if decision.changed == "config" else "")
    if decision.changed == "code":
        return f"after the code change, bits changed (final {decision.old_final} -> {new})"
    return None


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
    from harness.results import find_result_files

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
