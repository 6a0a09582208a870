"""How and where wandb logs, and what the jobs of one sweep share (harness/tracking/tracker.py uses it).

Which settings win: a value set in the config (``logger.wandb.*``) > a ``WANDB_*`` environment
variable > our default; ``resolve_options`` applies that rule and ``check`` refuses, before the
first run, a value wandb cannot use. ``OnlineGate`` lets the jobs of a sweep pay an unreachable
server's timeout once. Nothing here imports wandb.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from pathlib import Path

from harness import HarnessError

log = logging.getLogger("harness.tracking")

MODES = ("offline", "online", "disabled")
# Set by the sweep's callback (harness/experiment/callbacks.py, on_multirun_start) in the launching process;
# every job of that sweep inherits it, and the jobs share their online outcome under this id.
SWEEP_ENV = "HARNESS_SWEEP_ID"
MAX_GROUP = 128  # wandb's limit on a group's length
MAX_TAG = 64  # wandb's limit on a tag's length
# wandb's old names for its modes (still accepted in WANDB_MODE)
_MODE_ALIASES = {"dryrun": "offline", "run": "online"}

# Our defaults for wandb.Settings. The runs are logged after training, so wandb's system-metrics
# sampler would measure nothing useful, its console capture would fight the progress bar, its
# banner would print three lines per run, and its pip freeze costs ~0.15 s per run (the
# environment is in the config already). Each yields to its WANDB_* variable when that is set.
_QUIET_SETTINGS = {
    "console": "off",
    "silent": True,
    "x_disable_stats": True,
    "x_save_requirements": False,
    "save_code": False,
}


# -- configuration ------------------------------------------------------------------------------


def _select(cfg, dotted: str, default=None):
    node = cfg
    for part in dotted.split("."):
        try:
            node = node[part] if part in node else None
        except TypeError:
            node = None
        if node is None:
            return default
    return node


def _plain_value(v):
    """An enum from the config schema as its value; anything else unchanged."""
    return getattr(v, "value", v)


def _env_var(setting: str) -> str:
    """The environment variable wandb reads for a Settings field: x_foo -> WANDB__FOO."""
    if setting.startswith("x_"):
        return "WANDB__" + setting[2:].upper()
    return "WANDB_" + setting.upper()


class TrackingConfigError(ValueError, HarnessError):
    """A ``logger.*`` value wandb cannot use; the message names the key and what is allowed."""


def folder_id(folder) -> str:
    """12 hex digits of the sha1 of a folder's absolute, resolved path: the same from any cwd."""
    return hashlib.sha1(str(Path(folder).resolve()).encode()).hexdigest()[:12]


def default_group(experiment_name, folder) -> str:
    """``<experiment>:<folder name>:<8 hex of the folder's absolute path>`` (one run or one sweep).

    Not a path relative to the current directory (that changed with where a command started): the
    folder name keeps it readable, the hash of the absolute path makes it unique per results folder
    and the same for every job, every resume and every cwd. Moving the folder gives a new group;
    ``logger.wandb.group`` (or WANDB_RUN_GROUP) pins one.
    """
    folder = Path(folder)
    name = folder.resolve().name[:80] or "root"
    return f"{experiment_name}:{name}:{folder_id(folder)[:8]}"[:MAX_GROUP]


def _bad(key: str, value, why: str, allowed: str) -> TrackingConfigError:
    return TrackingConfigError(f"{key}={value!r} {why}; {allowed}")


def check(cfg) -> None:
    """Every logger.wandb value the tracker uses, checked before any run (TrackingConfigError)."""
    group = _select(cfg, "logger.wandb.group")
    if group is not None and not (isinstance(group, str) and 0 < len(group) <= MAX_GROUP):
        raise _bad("logger.wandb.group", group, "is not a usable wandb group",
                   f"it must be a non-empty string of at most {MAX_GROUP} characters, or null for the default "
                   "(<experiment>:<folder name>:<hash of the results folder>).")
    name = _select(cfg, "logger.wandb.name")
    if name is not None and not (isinstance(name, str) and 0 < len(name) <= 64):
        raise _bad("logger.wandb.name", name, "is not a usable run-name prefix",
                   "it must be a non-empty string of at most 64 characters (it is put in front of every "
                   "run's own name, e.g. '<name> seed=0 arm=A'), or null for no prefix.")
    for tag in _select(cfg, "logger.wandb.tags") or []:
        if not (isinstance(tag, str) and 0 < len(tag) <= MAX_TAG):
            raise _bad("logger.wandb.tags", list(_select(cfg, "logger.wandb.tags")), f"holds the tag {tag!r}",
                       f"every tag must be a non-empty string of at most {MAX_TAG} characters (wandb's limit).")
    timeout = _select(cfg, "logger.wandb.init_timeout", 60.0)
    if not (_is_number(timeout) and timeout > 0):
        raise _bad("logger.wandb.init_timeout", timeout, "is not a timeout",
                   "it must be a number of seconds > 0 (60 by default).")
    every = _select(cfg, "logger.wandb.history_every", 1)
    if not (isinstance(every, int) and not isinstance(every, bool) and every >= 1):
        raise _bad("logger.wandb.history_every", every, "is not a step interval",
                   "it must be an integer >= 1 (1 logs the loss of every step).")


def resolve_options(cfg, out_dir: Path, environ=os.environ, sweep_root=None) -> dict:
    """Where and how to log: config value > WANDB_* variable > our default (see the module doc)."""
    check(cfg)
    mode = _plain_value(_select(cfg, "logger.wandb.mode"))
    if mode is None:
        mode = environ.get("WANDB_MODE")
    if mode is None and environ.get("WANDB_DISABLED", "").lower() in ("1", "true", "yes"):
        mode = "disabled"
    mode = str(mode or "offline").lower()
    mode = _MODE_ALIASES.get(mode, mode)
    project = _select(cfg, "logger.wandb.project") or environ.get("WANDB_PROJECT") or "harness"
    # given, it wins over the project a trainer's own logger names (tracking/notices.py)
    project_from = ("logger.wandb.project" if _select(cfg, "logger.wandb.project")
                    else "$WANDB_PROJECT" if environ.get("WANDB_PROJECT") else None)
    tags = _select(cfg, "logger.wandb.tags")
    root = Path(environ.get("WANDB_DIR") or out_dir).absolute()
    folder = Path(sweep_root if sweep_root is not None else out_dir)
    group = (_select(cfg, "logger.wandb.group") or environ.get("WANDB_RUN_GROUP")
             or default_group(_select(cfg, "experiment_name", "experiment"), folder))
    return {
        "mode": mode,
        "project": str(project),
        "project_from": project_from,
        "entity": _select(cfg, "logger.wandb.entity"),  # None: WANDB_ENTITY, or the account's default
        "tags": [str(t) for t in tags] if tags else None,  # None: WANDB_TAGS, if set
        "group": str(group),
        "name_prefix": _select(cfg, "logger.wandb.name") or environ.get("WANDB_NAME") or None,
        "job_type": environ.get("WANDB_JOB_TYPE") or None,  # None: the arm, or "analysis"
        "dir": root,
        "init_timeout": float(_select(cfg, "logger.wandb.init_timeout", 60.0)),
        "history_every": max(1, int(_select(cfg, "logger.wandb.history_every", 1))),
        "settings": {k: v for k, v in _QUIET_SETTINGS.items() if _env_var(k) not in environ},
    }


class OnlineGate:
    """The jobs of one sweep share one answer to "can wandb start a run online?".

    Two files in ``<sweep root>/wandb/``, named after the sweep's id (``HARNESS_SWEEP_ID``, set by
    the sweep's callback in the launching process and inherited by every job, so a file left by an
    earlier invocation of the same sweep folder is never read): ``harness-online-<id>.probe``,
    created exclusively by the one job that tries, and ``harness-online-<id>.json``, the outcome it
    records. A job that finds the outcome uses it; one that finds only the probe waits for the
    outcome (at most the init timeout and a margin, then tries itself). Without a sweep id (a single
    run) there is nothing to share and every call says "try".
    """

    def __init__(self, sweep_root, sweep_id: str | None, wait_s: float):
        self.folder = Path(sweep_root) / "wandb" if sweep_root is not None else None
        self.sweep_id = sweep_id if self.folder is not None else None
        self.wait_s = wait_s
        self.probing = False

    @property
    def state_file(self) -> Path:
        return self.folder / f"harness-online-{self.sweep_id}.json"

    @property
    def probe_file(self) -> Path:
        return self.folder / f"harness-online-{self.sweep_id}.probe"

    def decide(self) -> tuple[str, str | None]:
        """("try", None), or ("offline", why) when another job of this sweep found online failing."""
        if self.sweep_id is None:
            return "try", None
        state = self.read()
        if state is None:
            try:
                self.folder.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.probe_file, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)
                self.probing = True
                return "try", None
            except FileExistsError:
                deadline = time.monotonic() + self.wait_s
                while state is None and time.monotonic() < deadline:
                    time.sleep(0.1)
                    state = self.read()
            except OSError:
                return "try", None
        if state is not None and not state.get("ok", True):
            return "offline", f"{state.get('reason')} (recorded by {state.get('job')} in {self.state_file})"
        return "try", None

    def record(self, ok: bool, reason: str | None, job) -> None:
        """The outcome of this job's online attempt, for the others (only the probing job writes)."""
        if not self.probing:
            return
        self.probing = False
        try:
            tmp = self.state_file.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps({"ok": ok, "reason": reason, "job": str(job), "pid": os.getpid()}))
            os.replace(tmp, self.state_file)
        except OSError as e:
            log.debug(f"wandb: could not record the online outcome in {self.state_file}: {e}")

    def read(self) -> dict | None:
        if self.sweep_id is None:
            return None
        try:
            return json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return None

    def remove(self) -> None:
        if self.sweep_id is None:
            return
        for f in (self.state_file, self.probe_file):
            try:
                f.unlink()
            except OSError:
                pass


def offline_runs(root: Path, wandb_dir: Path) -> tuple[list[str], int]:
    """Glob patterns for ``wandb sync`` that cover every offline run of a results folder, and how
    many runs they match: the folder's own wandb/, every job's (<root>/<n>/wandb/), or WANDB_DIR's."""
    candidates = [f"{wandb_dir}/offline-run-*"]
    if wandb_dir == root.absolute() / "wandb":
        candidates.append(f"{root.absolute()}/*/wandb/offline-run-*")
    patterns, count = [], 0
    for pattern in candidates:
        found = [p for p in Path("/").glob(pattern.lstrip("/")) if p.is_dir()]
        if found:
            patterns.append(pattern)
            count += len(found)
    return patterns, count


# -- small helpers -------------------------------------------------------------------------------


def _describe(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:300]}" if text else type(e).__name__


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)
