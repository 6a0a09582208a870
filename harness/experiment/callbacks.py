"""Hydra callback: one folder per sweep, job folders named by what they hold, the analysis at the end.

``on_multirun_start`` (in the launching process, before any job is made) pins what every job's
folder is computed from, so that all jobs of one sweep land under ONE folder whatever they sweep:

- ``hydra.sweep.dir``: the folder the launcher names from the command line (conf/config.yaml), passed
  to every job as a literal. Without this, a job resolves the folder again from its own overrides
  (``optim.lr=0.01`` instead of ``optim.lr=0.01,0.05``; ``repro.certificate=False`` instead of
  ``false``) and a grid lands in one folder per grid point while the analysis looks in another.
- the job folder (``hydra.sweep.subdir``) names the grid point (the swept overrides other than seed
  and arm) and the (seed, arm) it holds: ``optim.lr=0.05/seed=2,arm=B``. Fixed overrides are left
  out of it (the sweep folder names them). Resume then finds a run where it was, whatever job
  number Hydra gives it this time.

``on_multirun_end`` analyses the sweep folder: one A/B, or, when it holds several settings around the
A/B (a grid), each grid point on its own plus a summary (grid.py). Hydra skips it when any job
failed, which is why jobs record failures in their result files instead of raising;
``python -m harness.analyze SWEEP_DIR [--grid]`` gives the same analysis whenever it could not run.
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, open_dict, read_write

log = logging.getLogger("harness")

NOT_GRID_KEYS = ("seed", "arm")  # a grid point is every swept key but these


def _quoted(text: str) -> str:
    return "'" + str(text).replace("\\", "\\\\").replace("'", "\\'") + "'"


def pin_sweep(config: DictConfig) -> None:
    """Add the hydra overrides that make every job of this sweep use one folder (see module doc)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(list(config.hydra.overrides.task))
    fixed = [o.key_or_group for o in parsed if not o.is_sweep_override()]
    exclude = list(config.hydra.job.config.override_dirname.exclude_keys)
    exclude += [k for k in fixed if k not in exclude]
    sweep_dir = str(config.hydra.sweep.dir)
    with read_write(config.hydra), open_dict(config.hydra):
        config.hydra.overrides.hydra.append(f"hydra.sweep.dir={_quoted(sweep_dir)}")
        config.hydra.overrides.hydra.append(
            "hydra.job.config.override_dirname.exclude_keys=[" + ",".join(_quoted(k) for k in exclude) + "]"
        )


class AnalyzeSweep(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        # Inherited by every job (in this process, a pool's workers, submitit's subprocesses):
        # the sweep's id, under which its jobs share wandb's online outcome (tracking.OnlineGate),
        # and this process's pid, which a pool worker's watchdog watches (harness/experiment/parallel/watchdog.py).
        from harness.tracking.options import SWEEP_ENV
        from harness.experiment.parallel.watchdog import LAUNCHER_ENV

        os.environ[SWEEP_ENV] = uuid.uuid4().hex[:12]
        os.environ[LAUNCHER_ENV] = str(os.getpid())
        pin_sweep(config)
        if "harness_sweeper" not in str(config.hydra.sweeper.get("_target_", "")):  # the sweepers of hydra_plugins/harness_sweeper (plain, sequential, race) write it themselves
            write_declaration(config, Path(str(config.hydra.sweep.dir)))

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        """Analyse the sweep; when the analysis fails, say why and exit 1 (after closing the tracker).

        Hydra turns an Exception raised in a callback into a warning and exits 0; SystemExit is not an
        Exception, so it passes Callbacks._notify and run_and_report and sets the exit status."""
        from harness.experiment.execute import fail

        if "harness_sweeper" in str(config.hydra.sweeper.get("_target_", "")):
            return  # that sweeper (plain, sequential or race) analysed the sweep itself
        analysis, problem = analyse_sweep(config, Path(config.hydra.sweep.dir))
        if problem:
            fail(problem, code=1)


def analyse_sweep(config: DictConfig, root: Path):
    """A sweep's analysis as root's declaration.json says (a grid's or one A/B's), shown and tracked:
    (the analysis or None, why it failed or None). Also the harness plain sweeper's."""
    from harness.analysis import AnalysisError
    from harness.analysis.grid import analyze_grid_dir, render_grid
    from harness.analysis.render.report import render_table

    problem = None
    try:
        analysis = analyze_grid_dir(root, ledger=config.get("ledger"))
    except AnalysisError as e:
        problem = sweep_analysis_failed(root, e)
        analysis = None
    grid = analysis is not None and str(analysis.get("schema", "")).startswith("harness.grid")
    if grid:
        render_grid(analysis)
    elif analysis is not None:
        from harness.ledger.record import ledger_path, record_written

        render_table(analysis, tables=bool(config.get("tables", False)))
        if ledger_path(config.get("ledger")) is not None:  # the sweep's claims, once, by the launching process
            record_written(analysis, root, warn=log.warning, ledger=ledger_path(config.get("ledger")))
    tracked = track_sweep_analysis(config, root, None if grid else analysis)
    if tracked and grid:
        log.info(f"sweep analysis: {root / 'grid.json'} (and analysis.json in each grid point's folder)")
    elif tracked and analysis is not None:
        log.info(f"sweep analysis: {root / 'analysis.json'}")
    return analysis, problem


def sweep_analysis_failed(root: Path, error) -> str:
    """The message of a sweep whose jobs ran but whose analysis failed (the process then exits 1)."""
    return (f"sweep analysis of {root} failed: {error} The jobs' result files are under {root}; "
            f"analyse them again with: python -m harness.analyze {root}")


def write_declaration(config: DictConfig, root: Path) -> None:
    """The sweep's declaration.json, written once by the launching process (its jobs' ab.seeds,
    seed and arm may differ; what is analysed does not). A config that declares nothing analysable
    is said here; every job then refuses it with the same sentence."""
    from harness.config.declaration import Declaration
    from harness.config.metric_spec import DeclarationError
    from harness.ledger.record import sweep_level
    from harness.ledger.store import LedgerError

    try:
        declaration = Declaration.from_config(config)
        # stats.fdr: the sweep's level from the ledger, before any job
        sweep_level(config.get("ledger"), declaration, root, swept=_swept(config)).write(root, say=log.warning)
    except DeclarationError as e:
        log.error(f"harness: error: {e}")
    except LedgerError as e:
        from harness.experiment.execute import fail

        fail(f"{e} No job was launched.")


def _swept(config) -> list:
    """The keys a sweep varies besides seed and arm (a grid's)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    overrides = OverridesParser.create().parse_overrides(list(config.hydra.overrides.task))
    return [o.key_or_group for o in overrides if o.is_sweep_override() and o.key_or_group not in ("seed", "arm")]


def track_sweep_analysis(config: DictConfig, root: Path, analysis) -> bool:
    """Log a sweep's analysis (None: nothing to log) to wandb and close the tracker, which also
    prints the sweep's one `wandb sync` hint for its jobs' runs. False when the wandb settings are
    bad (said in the log). Shared by this callback and the sequential sweeper."""
    from harness.tracking.tracker import open_tracker
    from harness.tracking.options import TrackingConfigError

    try:
        tracker = open_tracker(config, root, sweep_root=root)
    except TrackingConfigError as e:
        log.error(f"harness: error: {e}")
        return False
    if analysis is not None:
        tracker.log_analysis(analysis, root)
    for w in tracker.close():
        log.warning(w)
    return True
