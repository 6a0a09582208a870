"""Resume: which runs to skip, rerun or set aside, and one process per run at a time.

A run is skipped only when its completed result is sound (it belongs to its folder's seed and arm,
has its fingerprints, and finite numbers for metrics) and matches the config and the code; else it
is rerun and the log says why. What is replaced is moved under ``superseded/``, never deleted.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import socket
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

from harness.config.preflight import lock_timeout_problem  # noqa: F401 - the sweepers import it from here
from harness.experiment.arms import ExperimentError
from harness.experiment.identity import config_hash, describe_code_change, describe_config_change
from harness.results import MAX_RESULT_BYTES, load_steps, read_json, read_result, unreadable_reason
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
    if not os.path.lexists(path):  # lexists: a symlink loop or a dangling link is something to set aside
        return Decision(False, "no result yet")
    try:
        old = read_result(path)  # bounded: a huge file or a FIFO is refused unread (results.read_json)
    except (OSError, ValueError) as e:
        return Decision(False, f"the existing result file is unreadable ({unreadable_reason(e)})")
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
    # a fingerprint the run recorded as missing (it covered nothing) is what that run proves, not damage
    said = fp.get("missing") if isinstance(fp.get("missing"), dict) else {}
    missing = [k for k in ("init", "data_order", "final") if not isinstance(fp.get(k), str) and not said.get(k)]
    try:
        steps = load_steps(old)
        if (not steps or not steps.get("loss")) and fp.get("black_box") is not True:  # a command records no steps
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
    """Move an old result aside (never delete what was computed): whatever it is, a symlink loop too."""
    if not os.path.lexists(path):
        return None
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
    dest = path.parent / "superseded" / f"result.{stamp}.json"
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.replace(path, dest)
    weights = path.parent / "weights.pt"
    if weights.exists():
        os.replace(weights, dest.with_suffix(".weights.pt"))
    return dest


# When a waiting run says again that it is still waiting (seconds since it began waiting); then
# every REPEAT_EVERY seconds. Not silent, and not a line per poll in a log of hundreds of jobs.
_SAY_AT = (10.0, 60.0)
_REPEAT_EVERY = 300.0
_POLL = 0.25  # seconds between attempts to take a held lock


class LockTimeout(ExperimentError):
    """A run waited lock_timeout seconds for another process's lock on its folder."""


def holder_of(lock_path: Path) -> str:
    """Who holds a run lock, as its holder wrote it: "PID 123 on host node7 since 2026-...": with
    "(stopped: ...)" when that process is on this host and stopped (SIGSTOP, Ctrl-Z), which will
    never release the lock by itself."""
    try:
        info = json.loads(lock_path.read_text() or "{}")
    except (OSError, ValueError):
        info = {}
    pid, host = info.get("pid"), info.get("host")
    if not pid:
        return "a process that has not yet written its PID and host"
    text = f"PID {pid} on host {host} since {info.get('since', '?')}"
    if host == socket.gethostname():
        state = _process_state(pid)
        if state == "stopped":
            text += (f" (that process is stopped, e.g. by SIGSTOP or Ctrl-Z: it keeps the lock until it is "
                     f"continued with `kill -CONT {pid}` or ended)")
    return text


def _process_state(pid) -> Optional[str]:
    try:
        with open(f"/proc/{int(pid)}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, ValueError, IndexError):
        return None
    return "stopped" if state in ("T", "t") else "running"


def _waited(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


@contextlib.contextmanager
def run_lock(folder: Path, on_wait, timeout: Optional[float] = None, log=None):
    """An exclusive lock on a run's folder (released when the process dies, so never stale).

    The holder writes its PID, host and start time into the lock file. A run that must wait calls
    ``on_wait()``, then says through ``log`` (default: the "harness" logger) which lock file it waits
    for, who holds it (and whether that process is stopped), and again how long it has waited after
    10 s, 60 s and every 5 min. ``timeout`` (seconds, the config's lock_timeout; None: no bound)
    bounds the wait with a LockTimeout that says the same.
    """
    import fcntl

    problem = lock_timeout_problem(timeout)
    if problem:  # the sweepers and preflight say it before any job; this guards every other caller
        raise ExperimentError(problem + " Nothing was run.")
    say = log or logging.getLogger("harness").warning
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ".lock"
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            on_wait()
            _wait(f, path, timeout, say)
        try:
            f.seek(0)
            f.truncate()
            f.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}))
            f.flush()
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _wait(f, path: Path, timeout: Optional[float], say) -> None:
    import fcntl

    start = time.monotonic()
    say(f"waiting for the lock {path}, held by {holder_of(path)}"
        + (f"; giving up after lock_timeout={timeout:g} s" if timeout is not None else
           "; no lock_timeout is set, so it waits as long as that process runs"))
    marks = list(_SAY_AT)
    while True:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            waited = time.monotonic() - start
            if waited >= _SAY_AT[0]:
                say(f"got the lock {path} after waiting {_waited(waited)}")
            return
        except BlockingIOError:
            pass
        waited = time.monotonic() - start
        if timeout is not None and waited >= timeout:
            raise LockTimeout(
                f"waited {_waited(waited)} (lock_timeout={timeout:g}) for the lock {path}, held by "
                f"{holder_of(path)}. Another process is running this (seed, arm) in the same folder; this "
                "unit was not run and nothing of it was changed. Let that process finish (or end it), then "
                "run the same command again to resume; lock_timeout=null waits as long as it takes.")
        if waited >= marks[0]:
            say(f"still waiting for the lock {path} after {_waited(waited)}, held by {holder_of(path)}")
            marks = marks[1:] or [waited + _REPEAT_EVERY]
        time.sleep(_POLL)


def set_aside_other_configurations(out_dir: Path, arms: dict, seeds, log) -> None:
    """Results in this folder for seeds the experiment no longer runs, made with another config or
    code, are moved under superseded/ (kept, never deleted): otherwise they would sit beside the
    current ones and block (or, worse, join) the analysis."""
    from harness.results import find_result_files

    planned = {(s, a) for s in seeds for a in arms}
    for path in find_result_files(out_dir / "runs") if (out_dir / "runs").is_dir() else []:
        try:
            old = read_json(path, MAX_RESULT_BYTES)
        except (OSError, ValueError):
            continue  # unreadable: not set aside here; its own unit names it and reruns (decide)
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
