"""``harness.attach()``: the Run of the unit the harness launched, from inside a script of one's own.

A command arm (command.py) starts its script with HARNESS_SEED, HARNESS_ARM, HARNESS_RUN_DIR and
HARNESS_RUN (the unit's device, precision, determinism, stream seeds and declared metrics, as JSON).
``attach()`` builds the unit's Run from them and switches PyTorch into the unit's determinism mode
and threads, as a train.fn's unit is. What the Run recorded (init, data order, every step) is written
to ``HARNESS_RUN_DIR/attached.json`` when the script calls ``run.finish(metrics)``, when a trainer's
callback sees training end, or, failing those, when it exits; the command arm adopts it
(``Run.adopt``), so the pairing is proven and the certificate compares every step's bits, as for a
train.fn.

Run on its own (no HARNESS_RUN_DIR), ``attach(seed=...)`` returns a stand-alone Run on that seed
that records nothing and changes no setting: the script still runs without the harness.
"""

from __future__ import annotations

import atexit
import json
import os
from pathlib import Path
from typing import Mapping, Optional

# the names the command arm shares with the script live with the child's environment (process.py),
# which a command unit imports without torch
from harness.integrations.process import ATTACHED_NAME, RUN_ENV
from harness.integrations.command_env import ATTACHED_ENV_NAME
from harness.integrations import ranks
from harness.integrations.ranks import rank_side
from harness.integrations.ranks.trainer_ranks import child_world
from harness.training.run import Run
from harness.training.steps import RunUsageError


_RUNS: dict = {}  # one Run per unit and process: the script's attach() and a trainer's callback share it


def attach(seed: Optional[int] = None) -> "AttachedRun":
    """The Run of the unit the harness launched, or (run on its own) a stand-alone Run on ``seed``
    (default 0) that records nothing (a rank of bare torchrun: its loader reads the rank's share). Under the harness its seed (HARNESS_SEED) is the Run's; a
    command arm passes it to the script too (train.seed_arg), so the two agree. Called again under
    the harness, it returns the same Run."""
    folder = os.environ.get("HARNESS_RUN_DIR")
    if not folder:  # nothing is recorded, so each call may have a Run of its own (a notebook's trainings)
        # a rank of bare torchrun reads its share, as under the harness: the script trains alike either way
        return AttachedRun(0 if seed is None else int(seed), world=ranks.world())
    key = (folder, os.environ.get("HARNESS_SEED"))
    if key not in _RUNS:
        _RUNS[key] = _unit_run(folder)
    return _RUNS[key]


def _unit_run(folder: str) -> "AttachedRun":
    spec = _spec()
    import torch

    from harness.training.determinism import Settings, configure

    device = torch.device(spec["device"])  # the unit's, as the harness resolved it (cpu, cuda:0)
    w = ranks.world() or child_world()  # a rank of a unit that spans processes (torchrun, a trainer's), or None
    if w is not None and w.spans:
        device = rank_side.rank_device(device, w)
        rank_side.rank_process(Path(folder), w)
    settings = Settings(**spec["determinism"])
    configure(settings, device)  # on every rank, before any CUDA work
    if w is None or w.rank == 0:  # the unit's environment is rank 0's (the world joins it at finish)
        _report_environment(Path(folder), settings, device)
    record_to = Path(folder) / ATTACHED_NAME if w is None or w.rank == 0 else ranks.rank_record(Path(folder), w.rank)
    return AttachedRun(int(os.environ["HARNESS_SEED"]), device, spec["precision"], check_every=spec["check_every"],
                       metrics=spec["metrics"], stream_seeds=spec["stream_seeds"] or None, run_dir=folder,
                       record_to=record_to, world=w)


def _report_environment(folder: Path, settings, device) -> None:
    """What this process's torch is set to, for the unit's record (command_env.py: the harness knows
    it only from here): written once attach() has switched the modes, and again at the script's exit
    (what held at its end: a script may switch a mode off after attaching)."""
    import sys

    import torch

    from harness.training import math_modes
    from harness.training.determinism import capture_environment

    pinned = math_modes.read()

    def write() -> None:
        env = capture_environment(settings, device, pinned)
        on = torch.are_deterministic_algorithms_enabled()  # the mode in force, not the one asked for
        env["mode"] = "off" if not on else ("warn" if torch.is_deterministic_algorithms_warn_only_enabled() else "strict")
        env["interpreter"] = sys.executable
        _write(folder / ATTACHED_ENV_NAME, env)

    def at_exit() -> None:
        try:
            write()
        except Exception:  # noqa: BLE001 - at exit, what attach() wrote stands
            pass

    write()
    atexit.register(at_exit)


def _spec() -> dict:
    text = os.environ.get(RUN_ENV)
    missing = [k for k in ("HARNESS_SEED", RUN_ENV) if not os.environ.get(k)]
    if missing:
        raise RunUsageError(
            f"harness.attach(): HARNESS_RUN_DIR is set but {', '.join(missing)} is not. These are set together by "
            "a command arm (train.cmd) for the script it starts; unset HARNESS_RUN_DIR to run the script on its own.")
    try:
        spec = json.loads(text)
        spec["device"], spec["precision"], spec["check_every"]  # noqa: B018 - the keys a Run needs
        return spec
    except (ValueError, KeyError, TypeError) as e:
        raise RunUsageError(f"harness.attach(): {RUN_ENV}={text[:200]!r} is not what a command arm sets ({e}): "
                            "a JSON object with device, precision, determinism, stream_seeds, metrics, check_every.") from None


class AttachedRun(Run):
    """A Run whose record goes to a file (``record_to``) for the command arm that started the script,
    or nowhere (stand-alone). ``finish(metrics)`` is the script's to call, once, at its end; the
    metrics it is given join those the command arm reads (train.metrics_from wins on a name). A
    trainer's callback calls ``finish()`` when training ends, never at a validation in between."""

    def __init__(self, *args, record_to: Optional[Path] = None, world: Optional[ranks.World] = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.record_to = record_to
        self.world = world  # this process's rank, in a unit that spans processes (ranks.py)
        self.final_metrics: dict = {}  # what finish() without metrics records (a trainer's callback fills it)
        self._record: Optional[dict] = None  # what finish wrote (the steps are closed then)
        self._failed = False
        if record_to is not None:
            atexit.register(self._at_exit)

    @property
    def attached(self) -> bool:
        """Whether the harness launched this script (its record goes to the unit)."""
        return self.record_to is not None

    def add_metrics(self, metrics: Mapping) -> None:
        """Metrics a trainer reported (a validation, an evaluation, a test): kept for the record. Before
        training ended they wait for it; after it, the written record is rewritten with them."""
        self.final_metrics.update(metrics)
        if self._record is not None:
            self.finish()

    def finish(self, metrics: Optional[Mapping] = None) -> Optional[dict]:
        """Write what this Run recorded for the harness (stand-alone: nothing; returns None). Called
        again (a trainer's fit, then its test), it writes the same record with the metrics, and the
        trainer's step count, updated: steps taken after the first call are not in the record, and
        the count says so."""
        if self.record_to is None or self._failed:
            return None
        if self._record is None:
            try:
                self._record = super().finish({})
            except RunUsageError as e:  # the command arm reports it, naming the unit
                self._failed = True
                _write(self.record_to, {"error": str(e)})
                raise
            self._record.pop("weights", None)
        if self._trained is not None:
            self._record["fingerprints"]["steps_trained"] = self._trained
        if metrics is not None:  # kept: the rewrite at exit (finish() again) must not drop them
            self.final_metrics = dict(metrics)
        self._record["metrics"] = dict(self.final_metrics)
        if self.world is not None and self.world.spans and (self._record.get("world") or {}).get("backend") is None:
            self._record["world"] = rank_side.world_now(self.world)  # at the first finish: the group may go later
        if self.notices:  # a later trainer's too (a test after the fit)
            self._record["notices"] = list(self.notices)
        _write(self.record_to, self._record)
        return self._record

    def _shuffled(self, n, batch_size, g, drop_last):
        if self.world is None or not self.world.spans:
            return super()._shuffled(n, batch_size, g, drop_last)
        from harness.integrations.ranks.shards import ShardedBatches

        return ShardedBatches(n, batch_size, g, drop_last, rank=self.world.rank, size=self.world.size)

    def _at_exit(self) -> None:
        try:
            self.finish()
        except RunUsageError:
            pass  # written to the record: the command arm says it


def _write(path: Path, obj: dict) -> None:
    from harness.results import write_json

    write_json(path, obj)
