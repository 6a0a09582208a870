"""Hydra callback: analyse a finished sweep at its root.

Hydra skips ``on_multirun_end`` when any job failed, which is why jobs record failures in their
result files instead of raising; ``python -m harness.analyze SWEEP_DIR`` gives the same analysis
whenever this callback could not run.
"""

from __future__ import annotations

import logging
import os
import uuid
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

log = logging.getLogger("harness")


class AnalyzeSweep(Callback):
    def on_multirun_start(self, config: DictConfig, **kwargs) -> None:
        # Inherited by every job (in this process, a pool's workers, submitit's subprocesses):
        # the sweep's id, under which its jobs share wandb's online outcome (tracking.OnlineGate),
        # and this process's pid, which a pool worker's watchdog watches (harness/watchdog.py).
        from .tracking import SWEEP_ENV
        from .watchdog import LAUNCHER_ENV

        os.environ[SWEEP_ENV] = uuid.uuid4().hex[:12]
        os.environ[LAUNCHER_ENV] = str(os.getpid())

    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        from .analysis import AnalysisError, analyze_dir
        from .app import _stats_kwargs
        from .report import render_table
        from .tracking import TrackingConfigError, open_tracker

        root = Path(config.hydra.sweep.dir)
        try:
            analysis = analyze_dir(root, **_stats_kwargs(config))
        except AnalysisError as e:
            log.error(f"sweep analysis of {root} failed: {e}")
            analysis = None
        else:
            render_table(analysis)
        try:
            tracker = open_tracker(config, root, sweep_root=root)
        except TrackingConfigError as e:
            log.error(f"harness: error: {e}")
            return
        if analysis is not None:
            tracker.log_analysis(analysis, root)
        for w in tracker.close():  # also the sweep's one `wandb sync` hint for its jobs' runs
            log.warning(w)
        if analysis is not None:
            log.info(f"sweep analysis: {root / 'analysis.json'}")
