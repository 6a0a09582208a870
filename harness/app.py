"""One invocation of ``python -m harness``: run the experiment, analyse it, report, track.

Errors a user can fix (a bad key, a factor that does not exist, a missing dataset) print one clear
paragraph and exit with status 2. Failed runs are recorded in their result files; the analysis names
them and the process exits with status 1 after printing everything it could compute.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from .experiment import ExperimentError, run_experiment

log = logging.getLogger("harness")


def _say(msg: str) -> None:
    log.info(msg)


def fail(message: str, code: int = 2) -> None:
    print(f"\nharness: error: {message}\n", file=sys.stderr)
    raise SystemExit(code)


def run(cfg: DictConfig) -> None:
    hc = HydraConfig.get()
    out_dir = Path(hc.runtime.output_dir)
    multirun = hc.mode == RunMode.MULTIRUN
    sweep_root = Path(hc.sweep.dir) if multirun else out_dir
    narrowed = cfg.seed is not None or cfg.arm is not None

    from . import tracking
    from .determinism import spread_over_gpus
    from .watchdog import exit_with_parent

    if multirun and "joblib" in str(hc.launcher.get("_target_", "")):
        spread_over_gpus(hc.job.num)  # a local pool on a multi-GPU machine; submitit gets its GPU from SLURM
        exit_with_parent()  # a worker ends when the sweep's launcher is killed (harness/watchdog.py)
    try:
        tracker = tracking.open_tracker(cfg, out_dir, sweep_root=sweep_root)
    except tracking.TrackingConfigError as e:
        fail(str(e))
    try:
        try:
            certify = cfg.repro.certificate and _owns_certificate(cfg)
            outcome = run_experiment(
                cfg, out_dir, log=_say, tracker=tracker, certify=certify, certificate_dir=sweep_root,
                stop_on_fatal=not multirun,
            )
        except ExperimentError as e:
            if multirun:
                log.error(f"harness: error: {e}")
                raise  # Hydra records this job as failed; the other jobs go on
            fail(str(e))

        if narrowed or multirun:
            # One unit of a sweep: the sweep's callback (or harness.analyze) analyses all of them.
            _say(f"results in {out_dir}; analyse a whole tree with: python -m harness.analyze {sweep_root}")
            if outcome.failed and not multirun:
                raise SystemExit(1)
            return

        from .analysis import AnalysisError, analyze_dir
        from .report import render_table

        try:
            analysis = analyze_dir(out_dir, **_stats_kwargs(cfg))
        except AnalysisError as e:
            fail(f"no analysis: {e} The result files are in {out_dir / 'runs'}.", code=1)
        render_table(analysis)
        tracker.log_analysis(analysis, out_dir)
        _say(f"results: {out_dir}  (analysis.json, report.md, analysis.png)")
        if outcome.failed:
            names = ", ".join(f"seed={r['seed']} arm={r['arm']}" for r in outcome.failed)
            fail(f"{len(outcome.failed)} run(s) failed and were left out of the analysis: {names}.", code=1)
    finally:
        for w in tracker.close():
            log.warning(w)


def _owns_certificate(cfg: DictConfig) -> bool:
    """Within a sweep, the job that runs the first seed's first arm reruns it for the certificate."""
    first_seed = cfg.ab.seeds[0] if len(cfg.ab.seeds) else None
    first_arm = next(iter(cfg.ab.arms), None)
    return (cfg.seed is None or cfg.seed == first_seed) and (cfg.arm is None or cfg.arm == first_arm)


def _stats_kwargs(cfg: DictConfig) -> dict:
    s = cfg.stats
    return {
        "metric": s.metric,
        "margin": s.margin,
        "baseline": s.baseline,
        "alpha": s.alpha,
        "bootstrap_resamples": s.bootstrap_resamples,
        "bootstrap_seed": s.bootstrap_seed,
    }
