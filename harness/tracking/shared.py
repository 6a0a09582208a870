"""A unit's wandb run shared with its trainer's own wandb logger (Lightning's ``WandbLogger``, the
Hugging Face Trainer's ``report_to="wandb"``; harness/integrations/wandb_hook.py says when).

The tracker opens the unit's run before the unit trains (``open_unit_run``); the trainer's logger,
finding ``wandb.run`` open, logs into it instead of opening a run of its own; when the unit ends,
``log_run`` logs the unit's record into that same run and finishes it. One run per unit, named,
grouped and typed as every other.
"""

from __future__ import annotations

from pathlib import Path


def open_unit_run(tracker, folder: Path) -> str | None:
    """Open the wandb run of the unit whose folder is ``folder`` (runs/seed=S/arm=A under the
    tracker's results folder) now, and keep it in ``tracker._early`` for ``log_run``. A description
    of the run ("seed=0 arm=A, group G"), or None (not a unit of this folder, or wandb gave up)."""
    seed, arm = folder.parent.name, folder.name
    if (not seed.startswith("seed=") or not arm.startswith("arm=")
            or folder.parent.parent.parent.absolute() != tracker.out_dir.absolute()):
        return None
    name = f"{seed} {arm}"
    if name not in tracker._early:
        try:
            run = tracker._start(name, job_type=arm[4:], config={"seed": int(seed[5:]), "arm": arm[4:]})
        except Exception as e:  # noqa: BLE001 - a wandb failure never stops the experiment
            tracker._problem(name, e, folder)
            return None
        if run is None:
            return None
        tracker._early[name] = run
    return f"{name}, group {tracker.group}"


def log_at_step(run, shared: bool):
    """``log(row, step)``: a row at wandb's step ``step``. In a run a trainer logged into, the
    trainer's rows counted wandb's steps already (an earlier step would be dropped): the optimizer
    step is then the row's ``harness/step``, the x axis of the harness's keys."""
    if not shared:
        return lambda row, step: run.log(row, step=step)
    run.define_metric("harness/step")
    for key in ("train/loss", "metrics/*"):
        run.define_metric(key, step_metric="harness/step")
    return lambda row, step: run.log({**row, "harness/step": step})
