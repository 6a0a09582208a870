"""Hydra callback: analyse a finished sweep at its root.

Hydra skips ``on_multirun_end`` when any job failed, which is why jobs record failures in their
result files instead of raising; ``python -m harness.analyze SWEEP_DIR`` gives the same analysis
whenever this callback could not run.
"""

from __future__ import annotations

import logging
from pathlib import Path

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

log = logging.getLogger("harness")


class AnalyzeSweep(Callback):
    def on_multirun_end(self, config: DictConfig, **kwargs) -> None:
        from .analysis import AnalysisError, analyze_dir
        from .app import _stats_kwargs, group_name
        from .report import render_table
        from .tracking import open_tracker

        if "harness_sweeper" in str(config.hydra.sweeper.get("_target_", "")):
            return  # the sequential sweeper analysed the sweep itself, with its looks
        root = Path(config.hydra.sweep.dir)
        try:
            analysis = analyze_dir(root, **_stats_kwargs(config))
        except AnalysisError as e:
            log.error(f"sweep analysis of {root} failed: {e}")
            return
        render_table(analysis)
        tracker = open_tracker(config, root, group=group_name(config, root))
        tracker.log_analysis(analysis, root)
        for w in tracker.close():
            log.warning(w)
        log.info(f"sweep analysis: {root / 'analysis.json'}")
