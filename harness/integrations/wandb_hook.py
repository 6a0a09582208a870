"""One wandb run per unit when a trainer brings its own wandb logger (Lightning's ``WandbLogger``,
the Hugging Face Trainer's ``report_to="wandb"``).

A trainer's wandb logger opens a run of its own when training starts (a random name, its own
project, not grouped by seed or arm), unless a run is open in the process already: then it logs into
that one (Lightning's ``WandbLogger.experiment`` and transformers' ``WandbCallback.setup`` both reuse
``wandb.run``). So the harness's trainer callbacks ask here, before the trainer starts, for the
unit's run (``share``):

- "shared": the harness's tracker in this process logs this unit (a train.fn, workers=1,
  logger=wandb). It opens the unit's run now ("seed=S arm=A", in the experiment's group, job type the
  arm); the trainer's logger logs into it, and the tracker logs the unit's record into the same run
  when the unit ends;
- "off": the harness runs the unit but no tracker of this process logs it (a command arm's script,
  whose unit the harness logs; a worker process, whose units the main process logs; logger=none;
  the certificate's rerun). The trainer's wandb logging is turned off (``WANDB_MODE=disabled`` until
  the trainer ends; where wandb was set up in this process already, and read that variable then, a
  disabled run is opened for the trainer's logger to reuse), so the unit's one run is the harness's
  (none with logger=none);
- "own": the script runs on its own, without the harness: nothing changes.

The tracker offers its opener here (``offer``): tracking sits above integrations, which may not
import it. Torch-free, wandb-free.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Callable, Optional

log = logging.getLogger("harness.integrations")

# the open trackers of this process: folder of a unit -> a description of its opened wandb run, or None
_OPENERS: list[Callable[[Path], Optional[str]]] = []
_LEFT_OPEN = None  # a disabled run kept open after its trainer's training (Sharing.release(keep_run=True))


def offer(opener: Callable[[Path], Optional[str]]) -> None:
    """A tracker that can open a unit's wandb run before the unit trains (tracking/tracker.py)."""
    _OPENERS.append(opener)


def withdraw(opener) -> None:
    if opener in _OPENERS:
        _OPENERS.remove(opener)


class Sharing:
    """What became of a trainer's wandb logging for one unit (``share``)."""

    def __init__(self, mode: str, where: str = ""):
        self.mode, self.where = mode, where
        self._previous = False  # WANDB_MODE before turn_off set it (None: unset); False: not set by us
        self._said = False
        self._noop = None

    def turn_off(self) -> "Sharing":
        wandb = sys.modules.get("wandb")
        if wandb is None:  # wandb reads WANDB_MODE when it is set up (the trainer's logger's init)
            self._previous = os.environ.get("WANDB_MODE")
            os.environ["WANDB_MODE"] = "disabled"
        elif wandb.run is None:  # set up already: a disabled run open now is what the trainer's logger reuses
            self._noop = wandb.init(mode="disabled")
        return self

    def say(self, who: str, logger: str, project: Optional[str] = None, run=None) -> None:
        """Once: what happened to the trainer's wandb logger (called when the trainer has one).
        ``project``: the project the logger names, if it names one. The notice goes into ``run``'s
        record where the harness reads it (a Run with a unit folder: the harness says it once for all
        its units, at the end, and logs the unit in that project where it can, tracking/notices.py);
        it is printed here where no harness process will say it (no unit folder), and in an attached
        script, whose stderr is the unit's own log (stderr.txt)."""
        if self._said or self.mode == "own":
            return
        self._said = True
        carried = _carry(run, {"who": who, "logger": logger, "wandb": self.mode, "project": project})
        if carried and getattr(run, "record_to", None) is None:
            return
        named = f" (project {project!r})" if project else ""
        if self.mode == "shared":
            _say(f"{who}: {logger}{named} logs into the harness's wandb run of this unit ({self.where}): one run per unit.")
        else:
            _say(f"{who}: {logger}{named} is turned off for this unit (wandb disabled while the trainer runs): the "
                 "unit's one wandb run is the harness's, logged when the unit ends (none with logger=none).")

    def release(self, keep_run: bool = False) -> None:
        """The trainer is done: WANDB_MODE as it was (``off`` only). ``keep_run``: the disabled run
        opened for the trainer stays open (a Hugging Face ``trainer.evaluate()`` after ``train()``
        logs into it); the next ``share`` or ``wandb.init`` finishes it."""
        global _LEFT_OPEN
        if self._noop is not None:
            if keep_run:
                _LEFT_OPEN = self._noop
            else:
                _finish_if_open(self._noop)
            self._noop = None
        if self.mode != "off" or self._previous is False or os.environ.get("WANDB_MODE") != "disabled":
            return
        if self._previous is None:
            del os.environ["WANDB_MODE"]
        else:
            os.environ["WANDB_MODE"] = self._previous


def share(run_dir, harnessed: bool) -> Sharing:
    """The unit's wandb run for a trainer about to start. ``harnessed``: the harness runs this unit (a
    train.fn's Run, or an attached script); ``run_dir``: the unit's folder (None: written nowhere)."""
    global _LEFT_OPEN
    if _LEFT_OPEN is not None:  # an earlier trainer's disabled run, kept for its evaluate()
        _finish_if_open(_LEFT_OPEN)
        _LEFT_OPEN = None
    if not harnessed:
        return Sharing("own")
    if run_dir is not None:
        for opener in reversed(_OPENERS):
            where = opener(Path(run_dir))
            if where:
                return Sharing("shared", where)
    return Sharing("off").turn_off()


def _carry(run, notice: dict) -> bool:
    """Put ``notice`` in the record of ``run`` (a Run with a unit folder); whether it went there."""
    notices = getattr(run, "notices", None)
    if getattr(run, "run_dir", None) is None or not isinstance(notices, list):
        return False
    if notice not in notices:
        notices.append(notice)
    return True


def _finish_if_open(run) -> None:
    wandb = sys.modules.get("wandb")
    if wandb is not None and wandb.run is run:
        run.finish()


def _say(message: str) -> None:
    """Through logging where it prints (a Hydra app: console and log file), else on stderr (a script)."""
    if logging.getLogger().handlers and log.isEnabledFor(logging.INFO):
        log.info(message)
    else:
        print(message, file=sys.stderr, flush=True)
